/**
 * The load process of `npm run bench:overload`: a process of its own, so that its CPU (it shares the host's cores
 * with the service) shows apart from the service's and its clock is not the benchmark's. Forked by
 * processes.ts; each message `{ id, mix }` or `{ id, flood }` is one run, answered `{ id, result }` when it ends.
 */
import { runFlood, type FloodRun } from './flood.js';
import { runMix, type MixRun } from './mix.js';

type Message = { id: number; mix: MixRun } | { id: number; flood: FloodRun };

process.on('message', (message: Message) => {
  const run = 'mix' in message ? runMix(message.mix) : runFlood(message.flood);
  void run.then(
    (result) => process.connected && process.send!({ id: message.id, result }),
    (error: unknown) => process.connected && process.send!({ id: message.id, error: String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));
