/**
 * The Node.js line Paceline runs on (docs/operations.md "Upgrading the runtime"): package.json's `engines`, the
 * `node-linux-*` packages that bring it to a machine with another Node (`npm ci` links `node_modules/.bin/node`),
 * the Dockerfile's base image and this constant name the same major; `npm run lint` checks that they agree.
 */
export const NODE_MAJOR = 24;

/** Why `version` (as `process.versions.node`) cannot run Paceline, in one line; undefined when it can. */
export function runtimeProblem(version: string, execPath: string): string | undefined {
  const major = Number(version.split('.')[0]);
  if (major === NODE_MAJOR) return undefined;
  return (
    `Paceline runs on Node.js ${NODE_MAJOR}, and ${execPath} is ${version}: start it with npm start ` +
    `(npm ci brings Node.js ${NODE_MAJOR} into node_modules/.bin), or run dist/ with a Node.js ${NODE_MAJOR}`
  );
}
