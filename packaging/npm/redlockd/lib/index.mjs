import redlockd from "./index.js";

export const { startServer, startGroup, startCluster, resolveBinary, RedlockdError, Group, Cluster, Server, Node, Fault, VERSION } =
  redlockd;
export default redlockd;
