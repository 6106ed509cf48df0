//! GEO commands: members are sorted-set entries scored by their 52-bit geohash, as in
//! Redis; coordinates, distances and hashes are Redis 7.0.15's exact text (read from
//! redis-server), in RESP2 and RESP3.

use crate::support;
use support::*;

async fn sicily(c: &mut Raw) {
    let add = [
        "GEOADD",
        "Sicily",
        "13.361389",
        "38.115556",
        "Palermo",
        "15.087269",
        "37.502669",
        "Catania",
    ];
    assert_eq!(c.cmd(&add).await, int(2));
}

#[tokio::test]
async fn members_are_scored_by_their_geohash() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    sicily(&mut c).await;
    assert_eq!(
        c.cmd(&["ZRANGE", "Sicily", "0", "-1", "WITHSCORES"]).await,
        "*4\r\n$7\r\nPalermo\r\n$16\r\n3479099956230698\r\n$7\r\nCatania\r\n$16\r\n3479447370796909\r\n"
    );
    assert_eq!(c.cmd(&["TYPE", "Sicily"]).await, "+zset\r\n");
    assert_eq!(
        c.cmd(&["GEOHASH", "Sicily", "Palermo", "Catania", "nope"])
            .await,
        "*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n"
    );
    // NX, XX, CH as ZADD's.
    assert_eq!(
        c.cmd(&["GEOADD", "Sicily", "NX", "13", "38", "Palermo"])
            .await,
        int(0)
    );
    assert_eq!(
        c.cmd(&["GEOADD", "Sicily", "XX", "CH", "13", "38", "Palermo", "1", "1", "x"])
            .await,
        int(1)
    );
    assert_eq!(c.cmd(&["ZCARD", "Sicily"]).await, int(2));
    h.shutdown().await;
}

#[tokio::test]
async fn positions_and_distances_are_redis_text_in_both_protocols() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    sicily(&mut c).await;
    let palermo = ["13.36138933897018433", "38.11555639549629859"];
    assert_eq!(
        c.cmd(&["GEOPOS", "Sicily", "Palermo", "nope"]).await,
        format!(
            "*2\r\n*2\r\n$20\r\n{}\r\n$20\r\n{}\r\n*-1\r\n",
            palermo[0], palermo[1]
        )
    );
    assert_eq!(
        c.cmd(&["GEODIST", "Sicily", "Palermo", "Catania", "km"])
            .await,
        bulk("166.2742")
    );
    assert_eq!(
        c.cmd(&["GEODIST", "Sicily", "Palermo", "Catania"]).await,
        bulk("166274.1516")
    );
    assert_eq!(c.cmd(&["GEODIST", "Sicily", "Palermo", "nope"]).await, NIL);
    c.hello3().await;
    assert_eq!(
        c.cmd(&["GEOPOS", "Sicily", "Palermo", "nope"]).await,
        format!("*2\r\n*2\r\n,{}\r\n,{}\r\n_\r\n", palermo[0], palermo[1])
    );
    assert_eq!(
        c.cmd(&["GEODIST", "Sicily", "Palermo", "Catania", "km"])
            .await,
        bulk("166.2742")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn searches_answer_in_redis_order_with_their_options() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    sicily(&mut c).await;
    assert_eq!(
        c.cmd(&[
            "GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC",
            "WITHCOORD", "WITHDIST", "WITHHASH"
        ])
        .await,
        "*2\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "GEOSEARCH",
            "Sicily",
            "FROMMEMBER",
            "Palermo",
            "BYBOX",
            "400",
            "400",
            "km",
            "DESC"
        ])
        .await,
        "*2\r\n$7\r\nCatania\r\n$7\r\nPalermo\r\n"
    );
    assert_eq!(
        c.cmd(&["GEORADIUS", "Sicily", "15", "37", "100", "km"])
            .await,
        "*1\r\n$7\r\nCatania\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "GEORADIUSBYMEMBER_RO",
            "Sicily",
            "Palermo",
            "200",
            "km",
            "COUNT",
            "1"
        ])
        .await,
        "*1\r\n$7\r\nPalermo\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "GEORADIUS",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "STOREDIST",
            "d"
        ])
        .await,
        int(2)
    );
    assert_eq!(
        c.cmd(&["ZRANGE", "d", "0", "-1", "WITHSCORES"]).await,
        "*4\r\n$7\r\nCatania\r\n$18\r\n56.441257870158204\r\n$7\r\nPalermo\r\n$18\r\n190.44242984775784\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "GEOSEARCHSTORE",
            "d",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "100",
            "km"
        ])
        .await,
        int(1)
    );
    assert_eq!(
        c.cmd(&["ZRANGE", "d", "0", "-1"]).await,
        "*1\r\n$7\r\nCatania\r\n"
    );
    // Nothing found: the destination is deleted.
    assert_eq!(
        c.cmd(&[
            "GEOSEARCHSTORE",
            "d",
            "Sicily",
            "FROMLONLAT",
            "0",
            "0",
            "BYRADIUS",
            "1",
            "m"
        ])
        .await,
        int(0)
    );
    assert_eq!(c.cmd(&["EXISTS", "d"]).await, int(0));
    assert_eq!(
        c.cmd(&[
            "GEOSEARCH",
            "nokey",
            "FROMMEMBER",
            "x",
            "BYRADIUS",
            "1",
            "m"
        ])
        .await,
        "*0\r\n"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_redis_errors() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    sicily(&mut c).await;
    let cases: &[(&[&str], &str)] = &[
        (&["GEOADD", "Sicily", "200", "100", "x"], "ERR invalid longitude,latitude pair 200.000000,100.000000"),
        (&["GEOADD", "Sicily", "abc", "1", "x"], "ERR value is not a valid float"),
        (&["GEOADD", "Sicily", "NX", "XX", "1", "1", "x"], "ERR syntax error"),
        (&["GEOADD", "Sicily", "1", "1", "x", "2"], "ERR syntax error"),
        (&["GEODIST", "Sicily", "a", "b", "yd"], "ERR unsupported unit provided. please use M, KM, FT, MI"),
        (&["GEODIST", "Sicily", "a", "b", "km", "x"], "ERR syntax error"),
        (&["GEORADIUS", "Sicily", "15", "37", "-1", "km"], "ERR radius cannot be negative"),
        (&["GEORADIUS", "Sicily", "15", "37", "r", "km"], "ERR need numeric radius"),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "0"], "ERR COUNT must be > 0"),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "ANY"], "ERR the ANY argument requires COUNT argument"),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "STORE", "d", "WITHDIST"], "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        (&["GEORADIUS_RO", "Sicily", "15", "37", "1", "km", "STORE", "d"], "ERR syntax error"),
        (&["GEORADIUSBYMEMBER", "Sicily", "nope", "1", "km"], "ERR could not decode requested zset member"),
        (&["GEOSEARCH", "Sicily", "BYRADIUS", "1", "km", "ASC", "ASC"], "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"),
        (&["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "ASC", "ASC"], "ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"),
        (&["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "-1", "1", "km"], "ERR height or width cannot be negative"),
        (&["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "w", "1", "km"], "ERR need numeric width"),
        (&["GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "WITHHASH"], "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
    ];
    for (args, e) in cases {
        assert_eq!(c.cmd(args).await, err(e), "{args:?}");
    }
    c.cmd(&["SET", "s", "x"]).await;
    let wrongtype = err("WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(c.cmd(&["GEOADD", "s", "1", "1", "a"]).await, wrongtype);
    assert_eq!(c.cmd(&["GEOPOS", "s", "a"]).await, wrongtype);
    assert_eq!(
        c.cmd(&[
            "GEOSEARCH",
            "s",
            "FROMLONLAT",
            "1",
            "1",
            "BYRADIUS",
            "1",
            "km"
        ])
        .await,
        wrongtype
    );
    assert_eq!(c.cmd(&["ZCARD", "Sicily"]).await, int(2));
    h.shutdown().await;
}

/// GEORADIUS's STORE key is a key: COMMAND GETKEYS finds it, and ACL key patterns
/// check it.
#[tokio::test]
async fn the_store_key_of_georadius_is_a_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&[
            "COMMAND",
            "GETKEYS",
            "GEORADIUS",
            "src",
            "1",
            "1",
            "1",
            "km",
            "STORE",
            "a",
            "STOREDIST",
            "dst"
        ])
        .await,
        "*3\r\n$3\r\nsrc\r\n$1\r\na\r\n$3\r\ndst\r\n"
    );
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "u", "on", "nopass", "~src", "+@all"])
            .await,
        OK
    );
    assert_eq!(c.cmd(&["AUTH", "u", "x"]).await, OK);
    assert_eq!(
        c.cmd(&["GEORADIUS", "src", "1", "1", "1", "km"]).await,
        "*0\r\n"
    );
    assert!(c
        .cmd(&["GEORADIUS", "src", "1", "1", "1", "km", "STORE", "dst"])
        .await
        .starts_with("-NOPERM"));
    h.shutdown().await;
}
