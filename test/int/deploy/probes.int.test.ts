// Needs: prometheus
// docs/scaling.md "Deployment files": what of the deployment files needs a running server or a
// Debian tool (no image is built, nothing is applied). Every httpGet probe of the Kubernetes
// manifests and the image's HEALTHCHECK command are run against the real app (web) and the real
// metrics server (jobs), and promtool (from the prometheus package, installed by
// ops/ensure-tools.sh) checks the alert rules and the compose Prometheus configuration.
// The static checks of the same files (YAML, schemas, settings, the Dockerfile's facts) are in the
// lint, ops/lint/repository.ts: they read files only, so they need neither the stores nor a tool.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../../src/settings/config.js';
import { MetricsHub } from '../../../src/cluster/metrics-hub.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { hasTool, promtool } from '../../helpers/prometheus.js';

const K8S = 'ops/k8s';
const deployments = readdirSync(K8S)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .flatMap((file) => parseAllDocuments(readFileSync(join(K8S, file), 'utf8')).map((doc) => doc.toJS() as any))
  .filter((object) => object?.kind === 'Deployment');

/** The image's HEALTHCHECK command (continuations joined), as the exec-form array. */
function healthcheckCommand(): string[] {
  const line = readFileSync('Dockerfile', 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => /^HEALTHCHECK\s/i.test(l))!;
  return JSON.parse(line.replace(/^.*?\bCMD\s+/, '')) as string[];
}

/** Runs the image's HEALTHCHECK command as Docker would, with `env`; resolves with its exit code. */
async function healthcheck(env: Record<string, string>): Promise<number | null> {
  const [program, ...args] = healthcheckCommand();
  assert.is(program, 'node', 'the HEALTHCHECK needs nothing but node');
  // Not spawnSync: the servers it checks answer from this process's event loop.
  const child = spawn(process.execPath, args, {
    env: { PATH: process.env.PATH, ...env },
    stdio: 'ignore',
    timeout: 20_000,
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  return code;
}

const test = suite('deployment files against the real servers');
let app: TestApp;
let hub: { url: string; close(): Promise<void> };

test.before(async () => {
  app = await startTestApp({}, 'deploy-probes');
  const server = await new MetricsHub(pino({ level: 'silent' })).listen(0, '127.0.0.1', loadConfig({}));
  hub = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((done) => server.close(() => done())),
  };
});
test.after(async () => {
  await app?.close();
  await hub?.close();
});

test("every probe of the Kubernetes Deployments answers 200 on the real server of the pod's role", async () => {
  const bases = new Map([
    ['paceline-web', app.base],
    ['paceline-jobs', hub.url],
  ]);
  assert.equal(deployments.map((d) => d.metadata.name).sort(), [...bases.keys()].sort(), 'the Deployments');
  for (const deployment of deployments) {
    const name = deployment.metadata.name;
    const container = deployment.spec.template.spec.containers[0];
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      const get = container[probe]?.httpGet;
      if (!get) continue;
      const response = await fetch(`${bases.get(name)}${get.path}`);
      assert.is(response.status, 200, `${name}: ${probe} ${get.path} answers 200 on the real server`);
    }
  }
});

test("the Dockerfile's HEALTHCHECK works: healthy with a live server, unhealthy without", async () => {
  const web = new URL(app.base);
  assert.is(await healthcheck({ PORT: web.port }), 0, 'a web container with a live /healthz is healthy');
  assert.is(
    await healthcheck({ ROLE: 'jobs', METRICS_PORT: new URL(hub.url).port }),
    0,
    'a jobs container with a live /metrics is healthy',
  );
  assert.is(await healthcheck({ PORT: '1' }), 1, 'a container that does not answer is unhealthy');
});

test('promtool accepts the alert rules and the compose Prometheus configuration', () => {
  assert.ok(hasTool('promtool'), 'promtool is installed (npm test installs it with ops/ensure-tools.sh)');
  for (const args of [
    ['check', 'rules', 'ops/prometheus/alerts.yml'],
    ['check', 'config', 'ops/prometheus/prometheus.compose.yml'],
  ]) {
    const run = promtool(args);
    assert.is(run.status, 0, `promtool ${args.join(' ')}:\n${run.output}`);
  }
});

test.run();
