"""Checkers over the histories. Each violation says when it began (`first`, the grant of
the first lock involved) and showed (`shown`), and whether a hold involved acted past
the validity it was given (`overran`: Redlock's known limit, which only fencing tokens
cover); the harness uses these to find the fault behind it.

- mutex: holds are [acquire ok, release invoke] as the client saw them; a hold that
  begins while another client's hold is open is a violation (Jepsen's check of a
  linearizable lock: two clients that both believe they hold it).
- set: every element whose write the storage acknowledged must be in the set's final
  value; each missing one is a lost addition.
- fenced: an accepted write applied after an accepted write of a later-granted lock is
  a stale write; with tokens, tokens must also rise with the order locks were granted.
- bounds: every acquire and release returns within the bound the client's options
  promise (plus a scheduling slack), unless the client itself was paused meanwhile.

Every time (`t`) is CLOCK_MONOTONIC in nanoseconds, read by each process at the event:
the clients, the storage and the harness's windows share one timeline, so an event
logged before a request is sent is before everything the request causes.
"""

import json


def load_history(path):
    events = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                # The last line of a killed client can be cut short.
                continue
    return events


def holds(events, end_t):
    """hid -> dict(c, hid, start, end, token, valid_until) from clients' events: start
    is the acquire's ok, end the release's invoke (or `end_t`), valid_until the end of
    the validity the client was given."""
    out = {}
    for e in events:
        hid = e.get("hid")
        if e.get("ev") == "acquire" and e.get("ph") == "ok":
            out[hid] = {"c": e["c"], "hid": hid, "start": e["t"], "end": None,
                        "token": e.get("token"),
                        "valid_until": e["t"] + int(e.get("valid_ms", 0)) * 1_000_000}
        elif e.get("ev") == "release" and e.get("ph") == "invoke" and hid in out:
            out[hid]["end"] = e["t"]
    for h in out.values():
        if h["end"] is None:
            h["end"] = end_t
    return out


def violation(first, shown, overran, desc):
    """`overran`: the hold (or holds) at fault acted after its validity had ended, at
    the times given (Redlock's known limit: a pause or a delay longer than the
    validity); empty when every hold involved kept within its validity."""
    return {"first": first, "shown": shown, "overran": sorted(overran), "desc": desc}


def check_mutex(hmap):
    """Each hold that began while another client's was still open."""
    hs = sorted(hmap.values(), key=lambda h: h["start"])
    viol = []
    open_ = []
    for h in hs:
        open_ = [o for o in open_ if o["end"] > h["start"]]
        if open_:
            o = max(open_, key=lambda x: x["end"])
            over = [o["valid_until"]] if o["end"] > o["valid_until"] else []
            viol.append(violation(o["start"], h["start"], over,
                                  f"hold {h['hid']} began {(o['end'] - h['start']) / 1e6:.1f} ms before hold {o['hid']} ended"
                                  + (" (which had run past its validity)" if over else "")))
        open_.append(h)
    return viol


def _applied(storage_log, key):
    """hid -> the time its accepted write was applied."""
    return {w["hid"]: w["t"] for w in storage_log if w["key"] == key and w["accepted"]}


def check_set(events, storage_log, key, hmap):
    """Lost additions: acknowledged elements missing from the key's final value. Each is
    shown by the first accepted write after the element's own that left it out."""
    final = "[]"
    for w in storage_log:
        if w["key"] == key and w["accepted"]:
            final = w["value"]
    present = set(json.loads(final))
    applied = _applied(storage_log, key)
    viol = []
    for e in events:
        if e.get("ev") == "write" and e.get("ph") == "ok" and e["elem"] not in present:
            shown, by = e["t"], "?"
            written = False
            for w in storage_log:
                if w["key"] != key or not w["accepted"]:
                    continue
                if w["hid"] == e["hid"]:
                    written = True
                elif written and e["elem"] not in json.loads(w["value"]):
                    shown, by = w["t"], w["hid"]
                    break
            involved = [hmap[x] for x in (e["hid"], by) if x in hmap]
            first = min([h["start"] for h in involved] + [e["t"]])
            over = [h["valid_until"] for h in involved
                    if applied.get(h["hid"], 0) > h["valid_until"]]
            viol.append(violation(first, shown, over,
                                  f"element {e['elem']} (hold {e['hid']}) acknowledged, lost (overwritten by hold {by})"
                                  + (" (a write landed past its validity)" if over else "")))
    return viol, len(present)


def check_fenced(hmap, storage_log, key):
    """Stale writes accepted, and (with tokens) tokens out of grant order."""
    viol = []
    latest = None  # the latest-granted hold whose write was accepted so far
    for w in storage_log:
        if w["key"] != key or not w["accepted"] or w["hid"] not in hmap:
            continue
        h = hmap[w["hid"]]
        if latest is not None and h["start"] < latest["start"]:
            over = [h["valid_until"]] if w["t"] > h["valid_until"] else []
            viol.append(violation(h["start"], w["t"], over,
                                  f"stale write of hold {w['hid']} (token {w['token']}) accepted after hold {latest['hid']}'s"
                                  + (f" ({(w['t'] - h['valid_until']) / 1e6:.0f} ms past its validity)" if over else "")))
        elif latest is None or h["start"] > latest["start"]:
            latest = h
    tok = sorted((h for h in hmap.values() if h["token"] is not None), key=lambda h: h["start"])
    for a, b in zip(tok, tok[1:]):
        if b["token"] <= a["token"]:
            viol.append(violation(a["start"], b["start"], [],
                                  f"token {b['token']} of hold {b['hid']} not above {a['token']} of earlier hold {a['hid']}"))
    return viol


def check_bounds(events, paused, slack_ms):
    """([(t, description)] for acquires / releases that took longer than their bound,
    how many were checked, {op: (longest ms, its bound)}). `paused`: [(start_ns,
    end_ns)] when this client was stopped; operations it overlaps are not checked."""
    viol = []
    invoked = {}
    checked = 0
    longest = {}
    for e in events:
        if e.get("ev") not in ("acquire", "release"):
            continue
        key = (e["ev"], e.get("hid"))
        if e.get("ph") == "invoke":
            invoked[key] = e["t"]
            continue
        if "dur_ms" not in e:
            continue
        t0 = invoked.get(key, e["t"] - int(e["dur_ms"] * 1e6))
        if any(p0 < e["t"] and t0 < p1 for p0, p1 in paused):
            continue
        checked += 1
        if e["dur_ms"] > longest.get(e["ev"], (0, 0))[0]:
            longest[e["ev"]] = (e["dur_ms"], e["bound_ms"])
        if e["dur_ms"] > e["bound_ms"] + slack_ms:
            viol.append((e["t"], f"{e['ev']} of {e.get('hid')} took {e['dur_ms']:.0f} ms, bound {e['bound_ms']} ms"))
    return viol, checked, longest
