import redlockd from "./index.js";

export const { startServer, startCluster, resolveBinary, RedlockdError, Cluster, Server, Node, VERSION } =
  redlockd;
export default redlockd;
