/** A response as a test looks at it: status, lower-cased headers, parsed JSON (or text). */
export interface TestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  body?: unknown;
  token?: string;
  headers?: Record<string, string>;
  /** Sent as is instead of JSON-encoding `body`. */
  raw?: string;
  /** Gives up (the promise rejects) when no whole answer came within this many ms. */
  deadlineMs?: number;
}

/** One HTTP request to the service under test; redirects are not followed. */
export async function request<T = any>(
  base: string,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<TestResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.Authorization = `Bearer ${options.token}`;
  let body: string | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const signal = options.deadlineMs === undefined ? undefined : AbortSignal.timeout(options.deadlineMs);
  const response = await fetch(new URL(path, base), { method, headers, body, redirect: 'manual', signal });
  const text = await response.text();
  let parsed: unknown = text;
  if (text && (response.headers.get('content-type') ?? '').includes('json')) parsed = JSON.parse(text);
  return { status: response.status, headers: response.headers, body: parsed as T, text };
}
