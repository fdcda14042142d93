import { z } from 'zod';
import { charField } from '../char-field.js';
import { requireObject } from '../errors.js';

/** The body `readCredentials` accepts, for the API document. The parser also takes numbers as their text. */
export const credentialsInputSchema = z.object({
  username: charField().describe('Trimmed.'),
  password: charField(),
});

/**
 * Reads a login body as DRF's CharFields do: the trimmed username and the password, `''` where
 * invalid, and the field errors if any. It does not throw on a bad field: the login budget of the
 * named user is counted before the other fields are judged (README "Password guessing").
 */
export function readCredentials(body: unknown): { username: string; password: string; errors?: Record<string, string[]> } {
  const input = requireObject(body);
  const errors: Record<string, string[]> = {};
  const read = (name: 'username' | 'password') => {
    // As DRF's CharField: numbers are taken as their text.
    const value = typeof input[name] === 'number' ? String(input[name]) : input[name];
    if (value === undefined) errors[name] = ['This field is required.'];
    else if (value === null) errors[name] = ['This field may not be null.'];
    else if (typeof value !== 'string') errors[name] = ['Not a valid string.'];
    else if (value.trim() === '') errors[name] = ['This field may not be blank.'];
    else if (value.includes('\u0000')) errors[name] = ['Null characters are not allowed.'];
    else return value;
    return '';
  };
  const credentials = { username: read('username').trim(), password: read('password') };
  return Object.keys(errors).length > 0 ? { ...credentials, errors } : credentials;
}
