// A process that writes `count` access-log lines through the service's logger, then ends as asked:
// `sigterm` waits for SIGTERM and exits as a child's drain does (process.exit), `crash` throws.
import { createLogger } from '../../src/logger.js';

const [mode, count] = [process.argv[2], Number(process.argv[3])];
const logger = createLogger({ LOG_LEVEL: 'info' }, 'web', false);
for (let index = 0; index < count; index += 1)
  logger.info({ requestId: `line-${index}`, method: 'GET', route: '/api/tasks/', status: 200 }, 'request');
if (mode === 'crash')
  setImmediate(() => {
    throw new Error('a bug');
  });
else {
  process.on('SIGTERM', () => process.exit(0));
  process.send?.('logged');
}
