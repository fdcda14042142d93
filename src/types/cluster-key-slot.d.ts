/** The package ioredis itself uses to route keys; it ships no types. */
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot (0–16383) of a key, honouring a `{hash tag}`. */
  export default function hashSlot(key: string): number;
}
