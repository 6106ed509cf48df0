package interop;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** A separate process that takes a lock (watchdog on) and holds it until killed:
 * args: address, lock name, lockWatchdogTimeout in ms. */
public final class LockHolder {
    public static void main(String[] args) throws Exception {
        Config config = new Config();
        config.useSingleServer().setAddress("redis://" + args[0]);
        config.setLockWatchdogTimeout(Long.parseLong(args[2]));
        RedissonClient c = Redisson.create(config);
        RLock lock = c.getLock(args[1]);
        lock.lock();
        System.out.println("locked " + args[1]);
        System.out.flush();
        Thread.sleep(600_000); // killed by the test long before this
        c.shutdown();
    }
}
