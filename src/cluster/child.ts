import type { Config } from '../config.js';

/** Runs the child a primary forked, by the role it was given. */
export async function runChild(config: Config, role: string | undefined): Promise<void> {
  if (role === 'web') {
    const { runWebChild } = await import('../web.js');
    return runWebChild(config);
  }
  if (role === 'jobs') {
    const { runJobsChild } = await import('../../workers/main.js');
    return runJobsChild(config);
  }
  throw new Error(`unknown child role ${JSON.stringify(role)}`);
}
