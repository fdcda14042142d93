import { SECRET_KEYS, settingsSchema } from './config-schema.js';
import type { Config } from './config.js';

/** Settings as a process reads them: the Config they gave and the environment text they came from. */
export interface ReadSettings {
  config: Config;
  env: Readonly<Record<string, string | undefined>>;
}

/**
 * The settings whose values differ from `before` to `after`, one entry each in the order of the
 * settings table, as written: `THROTTLE_ANON=45/min (was 30/min)`, `PAGE_SIZE back to its default (was 3)`, and
 * `METRICS_AUTH changed (value not shown)` for a setting that may carry a credential.
 */
export function describeChanges(before: ReadSettings, after: ReadSettings): string[] {
  return Object.keys(settingsSchema.shape)
    .filter(
      (key) => JSON.stringify(before.config[key as keyof Config]) !== JSON.stringify(after.config[key as keyof Config]),
    )
    .map((key) => {
      if (SECRET_KEYS.has(key)) return `${key} changed (value not shown)`;
      const [was, now] = [textOf(before.env[key]), textOf(after.env[key])];
      return `${key}${now === undefined ? ' back to its default' : `=${now}`} (was ${was ?? 'its default'})`;
    });
}

/** A setting's text, or undefined when it is unset: empty counts as unset, as loadConfig reads it. */
function textOf(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
