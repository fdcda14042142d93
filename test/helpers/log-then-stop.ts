// A process that writes `count` access-log lines through the service's logger and ends in the same turn of the event
// loop, so they are all still waiting to be written: `sigterm` logs them when SIGTERM comes and exits as a child's
// drain does (process.exit), `crash` logs them and throws.
import { createLogger } from '../../src/base/logger.js';

const [mode, count] = [process.argv[2], Number(process.argv[3])];
const logger = createLogger({ LOG_LEVEL: 'info' }, 'web', false);
const logAll = () => {
  for (let index = 0; index < count; index += 1)
    logger.info({ requestId: `line-${index}`, method: 'GET', route: '/api/tasks/', status: 200 }, 'request');
};
if (mode === 'crash') {
  logAll();
  throw new Error('a bug');
} else {
  // Alive until SIGTERM, as a server is.
  const alive = setInterval(() => {}, 1_000);
  process.on('SIGTERM', () => {
    clearInterval(alive);
    logAll();
    process.exit(0);
  });
  process.send?.('ready');
}
