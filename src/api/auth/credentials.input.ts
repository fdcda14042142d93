import { z } from 'zod';
import { charField, readCharField } from '../../base/char-field.js';
import { requireObject } from '../../base/errors.js';

/** The body `readCredentials` accepts, for the API document. The parser also takes numbers as their text. */
export const credentialsInputSchema = z.object({
  username: charField().describe('Trimmed.'),
  password: charField(),
});

/**
 * Reads a login body as DRF's CharFields do: the trimmed username and the password, `''` where
 * invalid, and the field errors if any. It does not throw on a bad field: the login budget of the
 * named user is counted before the other fields are judged (docs/security.md "Password guessing").
 */
export function readCredentials(body: unknown): {
  username: string;
  password: string;
  errors?: Record<string, string[]>;
} {
  const input = requireObject(body);
  const errors: Record<string, string[]> = {};
  // DRF's password field keeps its white space; the username is trimmed.
  const credentials = {
    username: readCharField(input, 'username', { required: true }, errors) ?? '',
    password: readCharField(input, 'password', { required: true, trim: false }, errors) ?? '',
  };
  return Object.keys(errors).length > 0 ? { ...credentials, errors } : credentials;
}
