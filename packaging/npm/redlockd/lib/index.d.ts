/** A clock reading: the shared monotonic ms and each node's wall time (Unix ms). */
export interface ClockReading {
  monoMs: number;
  wallMs: number[];
}

export interface NodeStatus {
  index: number;
  port: number;
  state: "up" | "paused" | "isolated" | "killed";
  fence_ms: number;
  wall_ms: number;
}

export type RestartMode = "crash" | "lose_dir" | "clean";
export type Boot = "fence" | "snapshot" | "fresh";

export interface HarnessOptions {
  /** Longest TTL a client may set: ms, or "10s", "1500ms". Default 30 s. */
  maxTtl?: number | string;
  /** The restart fence after a restart (default max-ttl + 1 s; 0: none). */
  restartDelay?: number | string;
  /** Refuse writes that leave a key without a TTL. */
  requireTtl?: boolean;
  requirepass?: string;
  /** Seed of the server's randomness (default 1). */
  seed?: number;
  /** Keep node i's data in `${dir}/node-i` (default: a temporary directory, removed). */
  dir?: string;
  /** Log filter for the nodes' stderr (default "warn"). */
  log?: string;
  /** The redlockd binary (default: $REDLOCKD_BIN, else the platform package's). */
  binary?: string;
  startTimeoutMs?: number;
  extraArgs?: string[];
}

export interface GroupOptions extends HarnessOptions {
  /** How many nodes (default 5). */
  nodes?: number;
}

export type FaultAction =
  | "delay"
  | "error"
  | "noscript"
  | "tryagain"
  | "busy"
  | "loading"
  | "drop_reply"
  | "drop_request"
  | "close_before"
  | "close_after";

export interface FaultOptions {
  action: FaultAction;
  /** The command ("set", "evalsha"), or a container's subcommand ("script|load"). */
  command?: string;
  /** A glob one of the request's keys must match. */
  key?: string;
  clientName?: string;
  clientId?: number;
  /** As CLIENT LIST shows it: "127.0.0.1:51234". */
  clientAddr?: string;
  /** Fire at most this many times. */
  count?: number;
  /** Let this many requests in scope through first. */
  skip?: number;
  /** Fire with this probability, drawn from a generator seeded with `seed`. */
  probability?: number;
  seed?: number;
  /** "delay": how long. */
  ms?: number;
  /** "delay": on the test clock ("manual", default) or in real time. */
  clock?: "manual" | "real";
  /** "error": the reply's text, code first ("ERR boom"). */
  error?: string;
}

export interface FaultClient {
  id: number;
  name: string | null;
  addr: string;
}

export interface Firing {
  command: string[];
  client: FaultClient;
  mono_ms: number;
  wall_ms: number;
}

export interface FaultStatus {
  fault: number;
  node: number;
  action: FaultAction;
  matched: number;
  fired: number;
  firings: Firing[];
  [field: string]: unknown;
}

export interface Exchange {
  node: number;
  seq: number;
  client: FaultClient;
  command: string[];
  /** A string, number, null, array, or { error: text }. */
  reply: unknown;
  outcome: "answered" | "refused" | "reply_dropped" | "not_run";
  fault: number | null;
  mono_ms: number;
}

export declare class Fault {
  readonly node: Node;
  readonly id: number;
  readonly spec: FaultStatus;
  status(): Promise<FaultStatus>;
  fired(): Promise<number>;
  firings(): Promise<Firing[]>;
  clear(): Promise<FaultStatus>;
}

export declare class RedlockdError extends Error {}

export declare class Node {
  readonly index: number;
  readonly host: string;
  readonly port: number;
  /** `redis://host:port` */
  readonly url: string;
  readonly dir: string | null;
  readonly addr: string;
  kill(): Promise<void>;
  restart(mode?: RestartMode): Promise<Boot>;
  pause(): Promise<void>;
  resume(): Promise<void>;
  isolate(): Promise<void>;
  heal(): Promise<void>;
  jumpWall(ms: number): Promise<void>;
  setWall(when: number | Date): Promise<void>;
  status(): Promise<NodeStatus>;
  fault(options: FaultOptions | FaultAction): Promise<Fault>;
  faults(): Promise<FaultStatus[]>;
  clearFaults(): Promise<FaultStatus[]>;
  record(capacity?: number): Promise<void>;
  history(options?: { take?: boolean }): Promise<Exchange[]>;
}

export declare class Group {
  readonly pid: number;
  readonly version: string;
  readonly binary: string;
  readonly nodes: Node[];
  readonly urls: string[];
  node(i: number): Node;
  request(op: string, fields?: Record<string, unknown>): Promise<any>;
  clock(): Promise<ClockReading>;
  advance(ms: number): Promise<ClockReading>;
  jumpWall(ms: number): Promise<ClockReading>;
  setWall(when: number | Date): Promise<ClockReading>;
  faults(): Promise<FaultStatus[]>;
  clearFaults(): Promise<FaultStatus[]>;
  record(capacity?: number): Promise<void>;
  history(options?: { take?: boolean }): Promise<Exchange[]>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class Server extends Group {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly addr: string;
  kill(): Promise<void>;
  restart(mode?: RestartMode): Promise<Boot>;
  pause(): Promise<void>;
  resume(): Promise<void>;
  isolate(): Promise<void>;
  heal(): Promise<void>;
  status(): Promise<NodeStatus>;
  fault(options: FaultOptions | FaultAction): Promise<Fault>;
}

export declare function startServer(options?: HarnessOptions): Promise<Server>;
export declare function startGroup(options?: GroupOptions): Promise<Group>;
export declare function resolveBinary(explicit?: string): string;
export declare const VERSION: string;

/** The old name of `Group` (before "cluster" was kept for Redis Cluster); still works. */
export declare const Cluster: typeof Group;
/** The old name of `GroupOptions`. */
export type ClusterOptions = GroupOptions;
/** The old name of `startGroup`; still works. */
export declare function startCluster(options?: GroupOptions): Promise<Group>;
