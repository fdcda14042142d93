/** Where a Redis Cluster is: some of its nodes (the client finds the rest) and the credentials, if any. */
export interface ClusterNodes {
  nodes: ReadonlyArray<{ host: string; port: number }>;
  username?: string;
  password?: string;
}

const SCHEME = 'redis-cluster://';
const EXPECTED =
  'expected host:port entries separated by commas (cache-1:6379,cache-2:6379) or ' +
  'redis-cluster://[user:password@]host:port,host:port';

/**
 * Reads `REDIS_CLUSTER_NODES`: `host:port,host:port,…` or `redis-cluster://[user:password@]host:port,…`
 * (IPv6 hosts in brackets). Credentials are percent-decoded.
 * @throws Error with one line naming the bad entry (never the credentials) and the expected form.
 */
export function parseClusterNodes(text: string): ClusterNodes {
  let rest = text.trim();
  const parsed: { username?: string; password?: string } = {};
  if (rest.toLowerCase().startsWith(SCHEME)) {
    rest = rest.slice(SCHEME.length).replace(/\/$/, '');
    const at = rest.lastIndexOf('@');
    if (at >= 0) {
      Object.assign(parsed, readCredentials(rest.slice(0, at)));
      rest = rest.slice(at + 1);
    }
    if (/[/?#]/.test(rest))
      throw new Error(`a redis-cluster:// URL holds only nodes, not a path or query; ${EXPECTED}`);
  } else if (rest.includes('://')) {
    throw new Error(
      `"${rest.slice(0, rest.indexOf('://') + 3)}" is not a cluster address (for one Redis, set REDIS_URL); ` +
        `${EXPECTED}`,
    );
  } else if (rest.includes('@')) {
    throw new Error(`credentials go in the redis-cluster:// form or REDIS_PASSWORD; ${EXPECTED}`);
  }
  const entries = rest.split(',').map((entry) => entry.trim());
  if (entries.length === 1 && entries[0] === '') throw new Error(`no nodes; ${EXPECTED}`);
  return { nodes: entries.map(readNode), ...parsed };
}

function readNode(entry: string): { host: string; port: number } {
  if (entry === '') throw new Error(`an empty entry between commas; ${EXPECTED}`);
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(entry);
  if (!match) {
    const reason = /:\d+$/.test(entry) ? 'is not a host name or address' : 'has no port';
    throw new Error(`"${entry}" ${reason}; ${EXPECTED}`);
  }
  const port = Number(match[2]);
  if (port < 1 || port > 65535) throw new Error(`"${entry}" has a port outside 1-65535; ${EXPECTED}`);
  return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port };
}

function readCredentials(userinfo: string): { username?: string; password?: string } {
  // A raw comma here means the credentials were not written first, or not percent-encoded.
  if (userinfo.includes(','))
    throw new Error(`credentials come first, percent-encoded, before every node; ${EXPECTED}`);
  const colon = userinfo.indexOf(':');
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw new Error(`the credentials are not percent-encoded correctly; ${EXPECTED}`);
    }
  };
  const username = decode(colon >= 0 ? userinfo.slice(0, colon) : userinfo);
  const password = colon >= 0 ? decode(userinfo.slice(colon + 1)) : undefined;
  return { ...(username ? { username } : {}), ...(password ? { password } : {}) };
}
