/** A local server started for development or tests. */
export interface RunningService {
  /** Connection URL, always on 127.0.0.1. */
  url: string;
  /** Stops the server and waits for it to exit. Safe to call more than once. */
  stop(): Promise<void>;
}
