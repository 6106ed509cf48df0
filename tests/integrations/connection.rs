//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT.

use crate::support;
use support::*;

const PASS: &str = "s3cret";

fn hello_map(kind: char, proto: i64, id: i64) -> String {
    let n = if kind == '%' { 7 } else { 14 };
    format!(
        "{kind}{n}\r\n{}{}{}{}{}{}{}{}{}{}{}{}{}*0\r\n",
        bulk("server"),
        bulk("redis"),
        bulk("version"),
        bulk("7.2.4"),
        bulk("proto"),
        int(proto),
        bulk("id"),
        int(id),
        bulk("mode"),
        bulk("standalone"),
        bulk("role"),
        bulk("master"),
        bulk("modules"),
    )
}

async fn client_id(c: &mut Raw) -> i64 {
    let r = c.cmd(&["CLIENT", "ID"]).await;
    r.trim_start_matches(':').trim_end().parse().unwrap()
}

#[tokio::test]
async fn ping_replies_pong_or_echoes_its_argument() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    assert_eq!(c.cmd(&["ping", "hi"]).await, bulk("hi"));
    assert_eq!(
        c.cmd(&["PING", "a", "b"]).await,
        err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(c.cmd(&["ECHO", "hello"]).await, bulk("hello"));
    assert_eq!(
        c.cmd(&["ECHO"]).await,
        err("ERR wrong number of arguments for 'echo' command")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn hello_3_replies_a_map_with_redis_fields() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let id = client_id(&mut c).await;
    assert_eq!(c.cmd(&["HELLO", "3"]).await, hello_map('%', 3, id));
    // The connection now speaks RESP3: a missing key is `_`.
    assert_eq!(c.cmd(&["GET", "missing"]).await, "_\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn hello_2_replies_a_flat_array() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let id = client_id(&mut c).await;
    assert_eq!(c.cmd(&["HELLO", "2"]).await, hello_map('*', 2, id));
    assert_eq!(c.cmd(&["HELLO"]).await, hello_map('*', 2, id));
    assert_eq!(c.cmd(&["GET", "missing"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn hello_with_a_bad_version_is_noproto_or_not_an_integer() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["HELLO", "4"]).await,
        err("NOPROTO unsupported protocol version")
    );
    assert_eq!(
        c.cmd(&["HELLO", "1"]).await,
        err("NOPROTO unsupported protocol version")
    );
    assert_eq!(
        c.cmd(&["HELLO", "abc"]).await,
        err("ERR Protocol version is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["HELLO", "3", "foo"]).await,
        err("ERR Syntax error in HELLO option 'foo'")
    );
    // Nothing changed: still RESP2.
    assert_eq!(c.cmd(&["GET", "missing"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn hello_setname_names_the_connection() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let r = c.cmd(&["HELLO", "3", "SETNAME", "worker-1"]).await;
    assert!(r.starts_with("%7\r\n"), "{r}");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).await, bulk("worker-1"));
    assert_eq!(
        c.cmd(&["HELLO", "3", "SETNAME", "a b"]).await,
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn redis_crate_resp3_connection_works() {
    let h = start().await;
    let mut con = conn_resp3(&h).await;
    assert_eq!(
        query(&mut con, &["SET", "k", "v", "NX", "PX", "1000"])
            .await
            .unwrap(),
        redis::Value::Okay
    );
    assert_eq!(
        query(&mut con, &["SET", "k", "v", "NX", "PX", "1000"])
            .await
            .unwrap(),
        redis::Value::Nil
    );
    assert_eq!(
        query(&mut con, &["PTTL", "k"]).await.unwrap(),
        redis::Value::Int(1000)
    );
    h.shutdown().await;
}

#[tokio::test]
async fn commands_before_auth_get_noauth() {
    let h = start_with_password(PASS).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["GET", "k"]).await,
        err("NOAUTH Authentication required.")
    );
    assert_eq!(
        c.cmd(&["PING"]).await,
        err("NOAUTH Authentication required.")
    );
    // Unknown commands and arity are checked first, as in Redis.
    assert_eq!(
        c.cmd(&["NOSUCH"]).await,
        err("ERR unknown command 'NOSUCH', with args beginning with: ")
    );
    assert_eq!(
        c.cmd(&["HELLO", "3"]).await,
        err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
    );
    assert_eq!(c.cmd(&["AUTH", PASS]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn auth_with_a_wrong_password_is_wrongpass() {
    let h = start_with_password(PASS).await;
    let mut c = Raw::to(&h).await;
    let wrongpass = err("WRONGPASS invalid username-password pair or user is disabled.");
    assert_eq!(c.cmd(&["AUTH", "nope"]).await, wrongpass);
    assert_eq!(c.cmd(&["AUTH", "someone", PASS]).await, wrongpass);
    assert_eq!(
        c.cmd(&["HELLO", "3", "AUTH", "default", "nope"]).await,
        wrongpass
    );
    assert_eq!(
        c.cmd(&["GET", "k"]).await,
        err("NOAUTH Authentication required.")
    );
    assert_eq!(c.cmd(&["AUTH", "default", PASS]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn hello_auth_authenticates_and_switches_protocol() {
    let h = start_with_password(PASS).await;
    let mut c = Raw::to(&h).await;
    let r = c.cmd(&["HELLO", "3", "AUTH", "default", PASS]).await;
    assert!(r.starts_with("%7\r\n"), "{r}");
    assert_eq!(c.cmd(&["GET", "k"]).await, "_\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn redis_crate_connects_with_a_password_in_the_url() {
    let h = start_with_password(PASS).await;
    let mut con = connect_url(&format!("redis://:{PASS}@{}/", h.addr())).await;
    assert_eq!(
        query(&mut con, &["SET", "k", "v"]).await.unwrap(),
        redis::Value::Okay
    );
    h.shutdown().await;
}

#[tokio::test]
async fn auth_without_a_configured_password_is_an_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["AUTH", "x"]).await,
        err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
    );
    assert_eq!(c.cmd(&["AUTH", "default", "anything"]).await, OK);
    assert_eq!(
        c.cmd(&["AUTH", "a", "b", "c"]).await,
        err("ERR syntax error")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn select_isolates_databases() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "db0"]).await;
    assert_eq!(c.cmd(&["SELECT", "3"]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, NIL);
    c.cmd(&["SET", "k", "db3"]).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(1));
    assert_eq!(c.cmd(&["SELECT", "0"]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("db0"));
    // Another connection starts in db 0.
    let mut other = Raw::to(&h).await;
    assert_eq!(other.cmd(&["GET", "k"]).await, bulk("db0"));
    h.shutdown().await;
}

#[tokio::test]
async fn select_out_of_range_is_an_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let range = err("ERR DB index is out of range");
    assert_eq!(c.cmd(&["SELECT", "16"]).await, range);
    assert_eq!(c.cmd(&["SELECT", "-1"]).await, range);
    assert_eq!(
        c.cmd(&["SELECT", "abc"]).await,
        err("ERR value is not an integer or out of range")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn quit_replies_ok_and_closes() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["QUIT"]).await, OK);
    assert!(c.closed().await);
    h.shutdown().await;
}

#[tokio::test]
async fn reset_restores_a_fresh_connection_state() {
    let h = start_with_password(PASS).await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["HELLO", "3", "AUTH", "default", PASS, "SETNAME", "n"])
        .await;
    c.cmd(&["SELECT", "2"]).await;
    assert_eq!(c.cmd(&["RESET"]).await, "+RESET\r\n");
    assert_eq!(
        c.cmd(&["GET", "k"]).await,
        err("NOAUTH Authentication required.")
    );
    c.cmd(&["AUTH", PASS]).await;
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).await, NIL);
    c.cmd(&["SET", "k", "db0"]).await;
    c.cmd(&["SELECT", "0"]).await;
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("db0"));
    h.shutdown().await;
}

#[tokio::test]
async fn client_id_is_unique_per_connection() {
    let h = start().await;
    let mut a = Raw::to(&h).await;
    let mut b = Raw::to(&h).await;
    let (ia, ib) = (client_id(&mut a).await, client_id(&mut b).await);
    assert!(ia > 0 && ib > 0 && ia != ib);
    h.shutdown().await;
}

#[tokio::test]
async fn client_setname_and_getname_round_trip() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).await, NIL);
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "locker"]).await, OK);
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).await, bulk("locker"));
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "a\nb"]).await,
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME"]).await,
        err("ERR wrong number of arguments for 'client|setname' command")
    );
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", ""]).await, OK);
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn client_setinfo_is_shown_in_client_info_and_list() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let id = client_id(&mut c).await;
    assert_eq!(
        c.cmd(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]).await,
        OK
    );
    assert_eq!(c.cmd(&["CLIENT", "SETINFO", "lib-ver", "5.0.1"]).await, OK);
    assert_eq!(
        c.cmd(&["CLIENT", "SETINFO", "foo", "bar"]).await,
        err("ERR Unrecognized option 'foo'")
    );
    c.cmd(&["CLIENT", "SETNAME", "me"]).await;
    let info = c.cmd(&["CLIENT", "INFO"]).await;
    assert!(info.contains(&format!("id={id} ")), "{info}");
    assert!(info.contains(" name=me "), "{info}");
    assert!(info.contains("lib-name=redis-py lib-ver=5.0.1"), "{info}");
    let mut other = Raw::to(&h).await;
    let list = other.cmd(&["CLIENT", "LIST"]).await;
    assert!(list.contains(&format!("id={id} ")), "{list}");
    assert!(list.contains("lib-name=redis-py"), "{list}");
    assert_eq!(
        list.matches("id=").count() - list.matches("lib-id=").count(),
        2
    );
    h.shutdown().await;
}

#[tokio::test]
async fn client_no_evict_and_no_touch_accept_on_and_off() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]).await, OK);
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "OFF"]).await, OK);
    assert_eq!(c.cmd(&["CLIENT", "NO-TOUCH", "on"]).await, OK);
    assert_eq!(
        c.cmd(&["CLIENT", "NO-EVICT", "maybe"]).await,
        err("ERR syntax error")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn client_maint_notifications_is_an_error_and_the_connection_stays_usable() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["HELLO", "3"]).await;
    assert_eq!(
        c.cmd(&[
            "CLIENT",
            "MAINT_NOTIFICATIONS",
            "ON",
            "moving-endpoint-type",
            "internal-ip"
        ])
        .await,
        err("ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.")
    );
    assert_eq!(c.cmd(&["SET", "k", "v", "NX", "PX", "100"]).await, OK);
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    h.shutdown().await;
}

/// CLIENT KILL reaches an idle connection: one that has sent requests (its wait then
/// keeps the waker it registered before, without taking the wake slot's lock) and
/// one that was blocked and served in between (another wait registered meanwhile).
#[tokio::test]
async fn client_kill_ends_an_idle_client_after_requests_and_after_a_block() {
    let h = start().await;
    let mut admin = Raw::to(&h).await;
    let mut idle = Raw::to(&h).await;
    let id = client_id(&mut idle).await;
    for _ in 0..3 {
        assert_eq!(idle.cmd(&["PING"]).await, "+PONG\r\n");
    }
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "ID", &id.to_string()]).await,
        int(1)
    );
    assert!(
        idle.closed().await,
        "the killed idle client stays connected"
    );

    let mut served = Raw::to(&h).await;
    let id = client_id(&mut served).await;
    served.send_cmd(&["BLPOP", "q", "0"]).await;
    wait_blocked(&h, 1).await;
    assert_eq!(admin.cmd(&["RPUSH", "q", "x"]).await, int(1));
    assert_eq!(
        served.reply().await,
        format!("*2\r\n{}{}", bulk("q"), bulk("x"))
    );
    assert_eq!(served.cmd(&["PING"]).await, "+PONG\r\n");
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "ID", &id.to_string()]).await,
        int(1)
    );
    assert!(
        served.closed().await,
        "the killed client stays connected after a block"
    );
    h.shutdown().await;
}
