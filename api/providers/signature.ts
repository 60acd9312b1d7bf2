/**
 * Webhook signatures, Twilio's scheme (HMAC-SHA1 over the URL plus the sorted POST parameters,
 * base64), through the twilio library, so the Twilio driver uses it unchanged. The URL is the
 * configured public base URL plus the request path, never the request's Host header.
 */
import twilio from 'twilio';

export type WebhookParams = Record<string, string>;

export function signWebhook(authToken: string, url: string, params: WebhookParams): string {
  return twilio.getExpectedTwilioSignature(authToken, url, params);
}

/** Constant-time verification (the library compares with scmp). */
export function verifyWebhook(authToken: string, signature: string | undefined, url: string, params: WebhookParams): boolean {
  if (!signature) return false;
  return twilio.validateRequest(authToken, signature, url, params);
}
