/**
 * The one Redis user of a server with a password: what Paceline's processes connect as. The
 * embedded Redis (src/embedded/redis.ts) creates it; a client names it here without loading that.
 */
export const SERVICE_USER = 'paceline';

/** The embedded Redis's password, under DATA_DIR (not in Redis's own directory, which its server account may write). */
export const REDIS_PASSWORD_FILE = 'redis-password';

/**
 * The URL a client of a server `startRedis` started connects with: as {@link SERVICE_USER}
 * when it has a password (its `default` user is off), bare without one. Every Paceline process
 * that reaches the embedded Redis (the service, CLI commands, jobs, benches) builds it here.
 */
export function embeddedRedisUrl(port: number, password: string | undefined): string {
  const auth = password === undefined ? '' : `${SERVICE_USER}:${encodeURIComponent(password)}@`;
  return `redis://${auth}127.0.0.1:${port}`;
}
