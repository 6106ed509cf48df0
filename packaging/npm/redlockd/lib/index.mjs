import redlockd from "./index.js";

export const { startServer, startCluster, resolveBinary, RedlockdError, Cluster, Server, Node, Fault, VERSION } =
  redlockd;
export default redlockd;
