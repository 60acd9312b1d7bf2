/**
 * Loads the Twilio driver script (click2call-twilio.js) on demand and returns the factory it
 * defines. The page's CSP allows scripts from its own origin only, which this is.
 */
import type { VoiceDriver } from './types.js';

export interface TwilioDriverFactory {
  create(options: { register: boolean }): VoiceDriver;
}

declare global {
  // Defined by click2call-twilio.js.
  var C2CTwilioDriver: TwilioDriverFactory | undefined;
}

export const TWILIO_SCRIPT = '/assets/js/click2call-twilio.js';

/** Adds the script tag once and resolves with the global factory. */
export function loadTwilioDriver(doc: Document, src = TWILIO_SCRIPT): Promise<TwilioDriverFactory> {
  if (globalThis.C2CTwilioDriver) return Promise.resolve(globalThis.C2CTwilioDriver);
  return new Promise((resolve, reject) => {
    const script = doc.createElement('script');
    script.src = src;
    script.async = true;
    script.onload = () => {
      const factory = globalThis.C2CTwilioDriver;
      if (factory) return resolve(factory);
      script.remove(); // as on an error: the next attempt adds a tag of its own, not one more beside it
      reject(new Error('The voice driver script loaded but defined no driver.'));
    };
    script.onerror = () => {
      script.remove(); // the next attempt adds a tag of its own
      reject(new Error('The voice driver script could not be loaded.'));
    };
    doc.head.appendChild(script);
  });
}
