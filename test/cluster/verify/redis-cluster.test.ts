import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import {
  assertAllHold,
  scratch,
  startOnRedisCluster,
  VERIFY_ARGS,
  type VerifyDeployment,
} from '../../helpers/verify-paceline.js';
import { runVerify } from '../../helpers/verify.js';

// docs/verify.md: one Paceline host (two workers) on a Redis Cluster of three masters.

const clustered = suite('verify against Paceline on a Redis Cluster');
let deployment: VerifyDeployment | undefined;

clustered.before(async () => {
  deployment = await startOnRedisCluster();
});

clustered.after(async () => {
  await deployment?.stop();
});

clustered('every check holds', async () => {
  assertAllHold(await runVerify(deployment!.base, VERIFY_ARGS, join(scratch, 'report-clustered')));
});

clustered.run();
