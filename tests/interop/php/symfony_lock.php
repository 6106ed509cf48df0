<?php
// Symfony Lock (Debian's php-symfony-lock) with its default settings: RedisStore over
// phpredis and over Predis, and CombinedStore (ConsensusStrategy) over 3 nodes.
// RedisStore keeps holders in a sorted set inside Lua (ZREMRANGEBYSCORE, ZSCORE,
// ZCOUNT, ZADD, ZREVRANGE WITHSCORES, PEXPIREAT, TYPE, TIME).
//
//   INTEROP_PHP_NODES=127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3 php symfony_lock.php
//
// Exits non-zero on the first failed check.

require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
require_once '/usr/share/php/Predis/autoload.php';

use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\CombinedStore;
use Symfony\Component\Lock\Store\RedisStore;
use Symfony\Component\Lock\Strategy\ConsensusStrategy;

$failures = 0;
function check(bool $ok, string $what): void
{
    global $failures;
    echo ($ok ? 'ok     ' : 'FAILED ') . $what . "\n";
    if (!$ok) {
        $failures++;
    }
}

$nodes = array_map(function ($s) {
    $i = strrpos($s, ':');
    return [substr($s, 0, $i), (int) substr($s, $i + 1)];
}, explode(',', getenv('INTEROP_PHP_NODES') ?: ''));
if (count($nodes) < 3) {
    fwrite(STDERR, "INTEROP_PHP_NODES must list 3 nodes\n");
    exit(2);
}

function phpredis(array $node): Redis
{
    $r = new Redis();
    $r->connect($node[0], $node[1], 5.0);
    return $r;
}

function predis(array $node): Predis\Client
{
    return new Predis\Client(['host' => $node[0], 'port' => $node[1]]);
}

/// Acquire, contend, refresh, release: what an application does with one store.
function exercise(string $label, $store): void
{
    $factory = new LockFactory($store);
    $name = 'interop:symfony:' . bin2hex(random_bytes(6));
    $lock = $factory->createLock($name, 30);
    $other = $factory->createLock($name, 30);
    try {
        check($lock->acquire(), "$label: acquires");
        check(!$other->acquire(), "$label: a second holder is refused");
        $lock->refresh();
        check($lock->isAcquired(), "$label: still held after refresh");
        $remaining = $lock->getRemainingLifetime();
        check($remaining !== null && $remaining > 25 && $remaining <= 30, "$label: refresh set the ttl ($remaining s)");
        $lock->release();
        check(!$lock->isAcquired(), "$label: released");
        check($other->acquire(), "$label: the other holder acquires after release");
        $other->release();
    } catch (Throwable $e) {
        check(false, "$label: " . get_class($e) . ': ' . $e->getMessage());
    }
}

exercise('RedisStore (phpredis)', new RedisStore(phpredis($nodes[0])));
exercise('RedisStore (Predis)', new RedisStore(predis($nodes[0])));
exercise('CombinedStore x3 (phpredis)', new CombinedStore(
    array_map(fn ($n) => new RedisStore(phpredis($n)), array_slice($nodes, 0, 3)),
    new ConsensusStrategy()
));
exercise('CombinedStore x3 (Predis)', new CombinedStore(
    array_map(fn ($n) => new RedisStore(predis($n)), array_slice($nodes, 0, 3)),
    new ConsensusStrategy()
));

if ($failures > 0) {
    echo "$failures check(s) failed\n";
    exit(1);
}
echo "all Symfony Lock checks passed\n";
