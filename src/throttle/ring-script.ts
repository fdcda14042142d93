import { readFileSync } from 'node:fs';

/**
 * The sliding-log check-and-record, one Redis Lua script (Redis 7, Lua 5.1 + `struct`) read once
 * from ring.lua, whose header states its KEYS, ARGV and reply. Why it stays exact under batches,
 * rolling reloads and clock steps: docs/throttling.md "The log in Redis".
 */
export const RING_SCRIPT = readFileSync(new URL('./ring.lua', import.meta.url), 'utf8');
