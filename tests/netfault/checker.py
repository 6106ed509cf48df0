"""Checkers over the histories. Each violation comes as (first, shown, description):
`first` the earliest event it involves (the grant of the first lock in it), `shown` when
it became visible; the harness uses the span to find the fault behind it.

- mutex: holds are [acquire ok, release invoke] as the client saw them; a hold that
  begins while another client's hold is open is a violation (Jepsen's check of a
  linearizable lock: two clients that both believe they hold it).
- set: every element whose write the storage acknowledged must be in the set's final
  value; each missing one is a lost addition.
- fenced: an accepted write applied after an accepted write of a later-granted lock is
  a stale write; with tokens, tokens must also rise with the order locks were granted.
- bounds: every acquire and release returns within the bound the client's options
  promise (plus a scheduling slack), unless the client itself was paused meanwhile.
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
    """hid -> dict(c, start, end, token, write) from one or more clients' events."""
    out = {}
    for e in events:
        hid = e.get("hid")
        if e.get("ev") == "acquire" and e.get("ph") == "ok":
            out[hid] = {"c": e["c"], "hid": hid, "start": e["t"], "end": None,
                        "token": e.get("token"), "invoke": None}
        elif e.get("ev") == "release" and e.get("ph") == "invoke" and hid in out:
            out[hid]["end"] = e["t"]
    for h in out.values():
        if h["end"] is None:
            h["end"] = end_t
    return out


def check_mutex(hmap):
    """For each hold that began while another was open."""
    hs = sorted(hmap.values(), key=lambda h: h["start"])
    viol = []
    open_ = []
    for h in hs:
        open_ = [o for o in open_ if o["end"] > h["start"]]
        others = [o for o in open_ if o["c"] != h["c"] or o["hid"] != h["hid"]]
        if others:
            o = max(others, key=lambda x: x["end"])
            viol.append((o["start"], h["start"], f"hold {h['hid']} began {(o['end'] - h['start']) / 1e6:.1f} ms before hold {o['hid']} ended"))
        open_.append(h)
    return viol


def check_set(events, storage_log, key, hmap):
    """Lost additions: acknowledged elements missing from the key's final value. Each is
    shown by the first accepted write after the element's own that left it out."""
    final = "[]"
    for w in storage_log:
        if w["key"] == key and w["accepted"]:
            final = w["value"]
    present = set(json.loads(final))
    viol = []
    for e in events:
        if e.get("ev") == "write" and e.get("ph") == "ok" and e["elem"] not in present:
            first, shown, by = e["t"], e["t"], "?"
            written = False
            for w in storage_log:
                if w["key"] != key or not w["accepted"]:
                    continue
                if w["hid"] == e["hid"]:
                    written = True
                elif written and e["elem"] not in json.loads(w["value"]):
                    shown, by = w["t"], w["hid"]
                    break
            starts = [hmap[h]["start"] for h in (e["hid"], by) if h in hmap]
            first = min(starts + [first])
            viol.append((first, shown, f"element {e['elem']} (hold {e['hid']}) acknowledged, lost (overwritten by hold {by})"))
    return viol, len(present)


def check_fenced(hmap, storage_log, key):
    """Stale writes accepted, and (with tokens) tokens out of grant order."""
    order = {h["hid"]: h["start"] for h in hmap.values()}
    viol = []
    latest_granted = None  # the grant time of the latest-granted lock already written
    latest_hid = None
    for w in storage_log:
        if w["key"] != key or not w["accepted"] or w["hid"] not in order:
            continue
        g = order[w["hid"]]
        if latest_granted is not None and g < latest_granted:
            viol.append((g, w["t"], f"stale write of hold {w['hid']} (token {w['token']}) accepted after hold {latest_hid}'s"))
        elif latest_granted is None or g > latest_granted:
            latest_granted, latest_hid = g, w["hid"]
    tok = sorted((h for h in hmap.values() if h["token"] is not None), key=lambda h: h["start"])
    for a, b in zip(tok, tok[1:]):
        if b["token"] <= a["token"]:
            viol.append((a["start"], b["start"], f"token {b['token']} of hold {b['hid']} not above {a['token']} of earlier hold {a['hid']}"))
    return viol


def check_bounds(events, paused, slack_ms):
    """[(t, description)] for acquires / releases that took longer than their bound.
    `paused`: [(start_ns, end_ns)] when this client was stopped."""
    viol = []
    invoked = {}
    checked = 0
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
        if e["dur_ms"] > e["bound_ms"] + slack_ms:
            viol.append((e["t"], f"{e['ev']} of {e.get('hid')} took {e['dur_ms']:.0f} ms, bound {e['bound_ms']} ms"))
    return viol, checked
