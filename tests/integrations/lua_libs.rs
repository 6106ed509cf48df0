//! The Lua libraries Redis ships besides `redis`: cmsgpack, struct, cjson (with its
//! settings), and the read-only protections around them. Every expected reply here was
//! read from redis-server 7.0.15 running the same script.

use crate::support;

use support::{bulk, err, int, start, unsha, Raw};

/// Lua that turns the string `s` into lowercase hex (scripts return binary this way).
const HEX: &str = "local function hex(s) local h = '' for i = 1, #s do h = h .. string.format('%02x', string.byte(s, i)) end return h end ";

async fn eval(con: &mut Raw, script: &str) -> String {
    unsha(&con.cmd(&["EVAL", script, "0"]).await)
}

fn script_err(text: &str) -> String {
    err(&format!(
        "ERR user_script:1: {text} script: SHA, on @user_script:1."
    ))
}

async fn check(cases: &[(&str, String)]) {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    for (script, want) in cases {
        assert_eq!(&eval(&mut con, script).await, want, "{script}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cmsgpack_packs_the_bytes_redis_packs() {
    let hex = |body: &str| format!("{HEX}return hex({body})");
    check(&[
        (&hex("cmsgpack.pack(0.1)"), bulk("cb3fb999999999999a")),
        (&hex("cmsgpack.pack(-1099511627776)"), bulk("d3ffffff0000000000")),
        (
            &hex("cmsgpack.pack({1,2,3,{a=1,b={true,false}},'x',2^53,-2^63,2^63,0/0,1/0,-0.0,1.5})"),
            bulk("9c01020382a16101a16292c3c2a178cf0020000000000000d38000000000000000ca5f000000cbfff8000000000000ca7f80000000ca3fc00000"),
        ),
        (&hex("cmsgpack.pack(string.rep('a', 31), 255, -33)"), bulk(&format!("bf{}ccffd0df", "61".repeat(31)))),
        (&hex("cmsgpack.pack(string.rep('b', 300)):sub(1, 3)"), bulk("da012c")),
        (&hex("cmsgpack.pack(string.rep('c', 70000)):sub(1, 5)"), bulk("db00011170")),
        // A cycle packs as a deep copy 16 tables deep, then nil.
        (
            &format!("{HEX}local a = {{x=nil,y=5}} local b = {{x=a}} a['x'] = b return hex(cmsgpack.pack(a))"),
            bulk("82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a178c0"),
        ),
        // Functions and nil pack as nil; arrays read through __index up to #t.
        (&hex("cmsgpack.pack(function() end, nil, true)"), bulk("c0c0c3")),
        (&hex("cmsgpack.pack({})"), bulk("90")),
        (&hex("cmsgpack.pack({[2]=1})"), bulk("810201")),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cmsgpack_unpacks_streams_offsets_and_errors_as_redis() {
    check(&[
        ("return {cmsgpack.unpack(cmsgpack.pack(1,2,3))}", "*3\r\n:1\r\n:2\r\n:3\r\n".into()),
        ("return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3))}", "*2\r\n:1\r\n:1\r\n".into()),
        ("return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 2)}", "*2\r\n:-1\r\n:3\r\n".into()),
        ("return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 3)}", "*1\r\n:-1\r\n".into()),
        ("return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2)}", "*3\r\n:2\r\n:1\r\n:2\r\n".into()),
        // limit 0 and offset 0 mean "everything, no offset" in lua-cmsgpack.
        ("return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 0)}", "*3\r\n:1\r\n:2\r\n:3\r\n".into()),
        ("return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 0, 1)}", "*1\r\n:1\r\n".into()),
        ("return {cmsgpack.unpack(string.char(0xcf, 255,255,255,255,255,255,255,255))}", "*1\r\n:-1\r\n".into()),
        ("return tostring(cmsgpack.unpack(string.char(0xd3, 0x80,0,0,0,0,0,0,1)))", bulk("-9.2233720368548e+18")),
        ("return {cmsgpack.unpack(string.char(0xd1, 0xff, 0x7f))}", "*1\r\n:-129\r\n".into()),
        ("return cmsgpack.unpack(cmsgpack.pack({a={b={c='d'}}})).a.b.c", bulk("d")),
        ("return cmsgpack.unpack(12)", int(49)),
        ("return cmsgpack.pack()", script_err("bad argument #0 to 'pack' (MessagePack pack needs input.)")),
        ("return cmsgpack.unpack({})", script_err("bad argument #1 to 'unpack' (string expected, got table)")),
        ("return cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 4)", script_err("Start offset 4 greater than input length 3.")),
        ("return cmsgpack.unpack_one(cmsgpack.pack(1,2,3), -1)", script_err("Invalid request to unpack with offset of -1 and limit of 3.")),
        ("return cmsgpack.unpack_limit('x')", script_err("bad argument #2 to 'unpack_limit' (number expected, got no value)")),
        ("return cmsgpack.unpack(string.char(0xd9))", script_err("Missing bytes in input.")),
        ("return cmsgpack.unpack(string.char(0xc4, 1, 1))", script_err("Bad data format in input.")),
        ("return cmsgpack.unpack(string.char(0x81, 0xc0, 1))", err("ERR table index is nil script: SHA, on @user_script:1.")),
        ("return {pcall(cmsgpack.unpack, string.char(0x92, 1))}", "*2\r\n$-1\r\n$23\r\nMissing bytes in input.\r\n".into()),
        ("return #{cmsgpack.unpack(string.rep(string.char(1), 7998))}", int(7998)),
        (
            "return #{cmsgpack.unpack(string.rep(string.char(1), 10000))}",
            script_err("stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"),
        ),
        ("return {cmsgpack._NAME, cmsgpack._VERSION}", "*2\r\n$8\r\ncmsgpack\r\n$18\r\nlua-cmsgpack 0.4.0\r\n".into()),
        ("cmsgpack.pack = 1", script_err("Attempt to modify a readonly table")),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn struct_packs_unpacks_and_sizes_as_redis() {
    let hex = |body: &str| format!("{HEX}return hex({body})");
    check(&[
        (&hex("struct.pack('>I4', 1)"), bulk("00000001")),
        (&hex("struct.pack('<i2h', -1, 300)"), bulk("ffff2c01")),
        (
            &hex("struct.pack('!4 b i', 1, 2)"),
            bulk("0100000002000000"),
        ),
        (
            &hex("struct.pack('>i16', -2)"),
            bulk(&format!("{}fffffffffffffffe", "00".repeat(8))),
        ),
        (&hex("struct.pack('s', 'abc')"), bulk("61626300")),
        (&hex("struct.pack('bc0', 3, 'abc')"), bulk("03616263")),
        (&hex("struct.pack('<d', 1.5)"), bulk("000000000000f83f")),
        (
            "return {struct.unpack('<i2i2', struct.pack('<i2i2', -1, 300))}",
            "*3\r\n:-1\r\n:300\r\n:5\r\n".into(),
        ),
        (
            "return {struct.unpack('bc0', struct.pack('bc0', 3, 'abc'))}",
            "*2\r\n$3\r\nabc\r\n:5\r\n".into(),
        ),
        (
            "return {struct.unpack('s', 'ab\\0c')}",
            "*2\r\n$2\r\nab\r\n:4\r\n".into(),
        ),
        (
            "return {struct.unpack('i', 'abcdabcd', 5)}",
            "*2\r\n:1684234849\r\n:9\r\n".into(),
        ),
        (
            "return {struct.unpack('>i9', string.rep('\\255', 9))}",
            "*2\r\n:-1\r\n:10\r\n".into(),
        ),
        ("return struct.size('bhlTiI3fdx c5')", int(44)),
        ("return struct.size('!bhlTiI3fdx c5')", int(54)),
        ("return struct.size('z')", int(0)),
        (
            "return struct.size('s')",
            script_err("bad argument #1 to 'size' (option 's' has no fixed size)"),
        ),
        (
            "return struct.pack('z')",
            script_err("bad argument #1 to 'pack' (invalid format option 'z')"),
        ),
        (
            "return struct.pack('c3', 'ab')",
            script_err("bad argument #3 to 'pack' (string too short)"),
        ),
        (
            "return struct.pack('ic', 1)",
            script_err("bad argument #3 to 'pack' (string expected, got nil)"),
        ),
        (
            "return struct.pack('i40', 1)",
            script_err("integral size 40 is larger than limit of 32"),
        ),
        (
            "return struct.pack('!3i', 1)",
            script_err("alignment 3 is not a power of 2"),
        ),
        (
            "return struct.pack('i99999999999', 1)",
            script_err("integral size overflow"),
        ),
        (
            "return struct.unpack('c0', 'abc')",
            script_err("format 'c0' needs a previous size"),
        ),
        (
            "return struct.unpack('s', 'abc')",
            script_err("unfinished string in data"),
        ),
        (
            "return struct.unpack('i', 'ab')",
            script_err("bad argument #2 to 'unpack' (data string too short)"),
        ),
        (
            "return struct.unpack('i', 'abcd', 0)",
            script_err("bad argument #3 to 'unpack' (offset must be 1 or greater)"),
        ),
        (
            "struct.pack = 1",
            script_err("Attempt to modify a readonly table"),
        ),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cjson_errors_and_settings_match_lua_cjson() {
    check(&[
        ("return cjson.decode('[1,')", script_err("Expected value but found T_END at character 4")),
        ("return cjson.decode('{\"a\" 1}')", script_err("Expected colon but found T_NUMBER at character 6")),
        ("return cjson.decode('\"a\\\\qb\"')", script_err("Expected value but found invalid escape code at character 3")),
        ("return cjson.decode('[1]\\0 x')[1]", int(1)),
        ("return cjson.decode('0x10')", int(16)),
        ("return tostring(cjson.decode('-Infinity'))", bulk("-inf")),
        ("return cjson.decode('1e')", script_err("Expected the end but found invalid token at character 2")),
        ("return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')", bulk("0 -5000 -1 0.0003 1023.2 0")),
        ("return cjson.decode(string.rep('[', 100000))", script_err("Found too many nested data structures (1001) at character 1001")),
        ("return cjson.encode({[true]=1})", script_err("Cannot serialise boolean: table key must be a number or string")),
        ("return cjson.encode({[1]=1, [12]=1})", script_err("Cannot serialise table: excessively sparse array")),
        ("return cjson.encode(1, 2)", script_err("bad argument #1 to 'encode' (expected 1 argument)")),
        ("local t = {} local c = t for i=1,999 do c[1] = {} c = c[1] end return #cjson.encode(t)", int(2000)),
        ("local t = {} local c = t for i=1,1000 do c[1] = {} c = c[1] end return #cjson.encode(t)", script_err("Cannot serialise, excessive nesting (1001)")),
        ("return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()}", "*3\r\n:1000\r\n:1000\r\n:14\r\n".into()),
        ("return cjson.encode_max_depth(0)", script_err("bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)")),
        ("return cjson.encode_max_depth(1, 2)", script_err("bad argument #2 to 'encode_max_depth' (found too many arguments)")),
        ("return cjson.encode_invalid_numbers('maybe')", script_err("bad argument #1 to 'encode_invalid_numbers' (invalid option 'maybe')")),
        ("local c = cjson.new() c.encode_number_precision(3) return {c.encode(1/3), cjson.encode(1/3)}", "*2\r\n$5\r\n0.333\r\n$16\r\n0.33333333333333\r\n".into()),
        ("local c = cjson.new() c.encode_invalid_numbers(true) return {c.encode(0/0), c.encode(-1/0)}", "*2\r\n$3\r\nnan\r\n$4\r\n-inf\r\n".into()),
        ("local c = cjson.new() c.encode_invalid_numbers('null') return {c.encode_invalid_numbers(), c.encode({0/0, 1})}", "*2\r\n$4\r\nnull\r\n$8\r\n[null,1]\r\n".into()),
        ("local c = cjson.new() c.encode_sparse_array(true) return c.encode({[1]=1, [12]=1})", bulk("{\"1\":1,\"12\":1}")),
        ("local c = cjson.new() c.decode_invalid_numbers(false) return c.decode('0x10')", script_err("Expected value but found invalid number at character 1")),
        ("local c = cjson.new() c.encode_keep_buffer(false) return {c.encode_keep_buffer(), c.encode({1})}", "*2\r\n$-1\r\n$3\r\n[1]\r\n".into()),
        ("return {cjson._NAME, cjson._VERSION}", "*2\r\n$5\r\ncjson\r\n$5\r\n2.1.0\r\n".into()),
        ("cjson.foo = 1", script_err("Attempt to modify a readonly table")),
        ("local c = cjson.new() c.foo = 1 return c.foo", int(1)),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cjson_settings_last_until_script_flush() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    assert_eq!(
        eval(&mut con, "return cjson.encode_number_precision(3)").await,
        int(3)
    );
    assert_eq!(
        eval(&mut con, "return cjson.encode(1/3)").await,
        bulk("0.333")
    );
    assert_eq!(con.cmd(&["SCRIPT", "FLUSH"]).await, support::OK);
    assert_eq!(
        eval(&mut con, "return cjson.encode(1/3)").await,
        bulk("0.33333333333333")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_global_table_and_its_metatable_are_read_only() {
    check(&[
        (
            "local g = getmetatable(_G) g.__index = {}",
            script_err("Attempt to modify a readonly table"),
        ),
        (
            "return {type(getmetatable(_G)), type(getmetatable(_G).__index)}",
            "*2\r\n$5\r\ntable\r\n$8\r\nfunction\r\n".into(),
        ),
        (
            "setmetatable(getmetatable(_G), nil)",
            err("ERR Attempt to modify a readonly table script: SHA, on @user_script:1."),
        ),
        ("return getmetatable('').__index == string", int(1)),
        (
            "redis = function() return 1 end",
            script_err("Attempt to modify a readonly table"),
        ),
    ])
    .await;
}

/// A job-queue script in the style of BullMQ's: the client packs job options with
/// MessagePack, the script unpacks them, stores fields, and packs a reply.
#[tokio::test(flavor = "multi_thread")]
async fn a_queue_script_that_unpacks_msgpack_options_runs() {
    const ADD_JOB: &str = r#"
local opts = cmsgpack.unpack(ARGV[2])
local id = redis.call('INCR', KEYS[1] .. ':id')
local jobKey = KEYS[1] .. ':' .. id
local fields = {'name', ARGV[1], 'attempts', opts.attempts or 1,
                'delay', opts.delay or 0, 'opts', cmsgpack.pack(opts)}
if opts.parent then
  fields[#fields + 1] = 'parentKey'
  fields[#fields + 1] = opts.parent.queue .. ':' .. opts.parent.id
end
redis.call('HSET', jobKey, unpack(fields))
local stored = cmsgpack.unpack(redis.call('HGET', jobKey, 'opts'))
local offset, first = cmsgpack.unpack_one(ARGV[3])
local _, second = cmsgpack.unpack_limit(ARGV[3], 1, offset)
return {id, stored.attempts, stored.removeOnComplete and 1 or 0,
        redis.call('HGET', jobKey, 'parentKey'), first, second}
"#;
    // {attempts=3, removeOnComplete=true, parent={id="7", queue="q:parent"}} as a
    // client's MessagePack library writes it (fixmap, fixstr keys).
    let mut opts = vec![0x83];
    opts.extend_from_slice(b"\xa8attempts\x03");
    opts.extend_from_slice(b"\xb0removeOnComplete\xc3");
    opts.extend_from_slice(b"\xa6parent\x82\xa2id\xa17\xa5queue\xa8q:parent");
    // Two values in one stream: "a", 300.
    let stream = b"\xa1a\xcd\x01\x2c".as_slice();
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    let reply = con
        .cmd_bytes(&[
            b"EVAL",
            ADD_JOB.as_bytes(),
            b"1",
            b"bull:q",
            b"job-name",
            &opts,
            stream,
        ])
        .await;
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "*6\r\n:1\r\n:3\r\n:1\r\n$10\r\nq:parent:7\r\n$1\r\na\r\n:300\r\n"
    );
    assert_eq!(con.cmd(&["HGET", "bull:q:1", "attempts"]).await, bulk("3"));
}

/// Big tables are walked without holding every key at once (mlua's references are
/// bounded), and JSON numbers are read in time proportional to their length.
#[tokio::test(flavor = "multi_thread")]
async fn big_tables_pack_and_encode() {
    check(&[
        ("local t = {} for i=1,20000 do t[tostring(i)]=i end return #cmsgpack.pack(t)", int(168_515)),
        ("local t = {} for i=1,20000 do t[tostring(i)]=i end return #cjson.encode(cjson.decode(cjson.encode(t)))", int(257_789)),
    ])
    .await;
}

/// cmsgpack.unpack of arrays nested thousands deep: 3,999 levels decode, deeper is
/// Redis 7.0.15's error, byte for byte. (A recursive decoder overflowed the thread's
/// stack here and ended the process.)
#[tokio::test(flavor = "multi_thread")]
async fn cmsgpack_unpack_of_deep_nesting_is_an_error_not_a_crash() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    let nested = |depth: usize| {
        format!("return type(cmsgpack.unpack(string.rep(string.char(0x91), {depth}) .. string.char(0)))")
    };
    assert_eq!(c.cmd(&["EVAL", &nested(3_999), "0"]).await, bulk("table"));
    for depth in [4_000, 1_000_000] {
        let script = nested(depth);
        let sha = sha1_smol::Sha1::from(&script).digest().to_string();
        assert_eq!(
            c.cmd(&["EVAL", &script, "0"]).await,
            err(&format!("ERR user_script:1: stack overflow (in function mp_decode_to_lua_array) script: {sha}, on @user_script:1."))
        );
    }
    let maps = "return type(cmsgpack.unpack(string.rep(string.char(0x81, 0x01), 100000) .. string.char(0)))";
    assert!(c
        .cmd(&["EVAL", maps, "0"])
        .await
        .starts_with("-ERR user_script:1: stack overflow"));
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
}
