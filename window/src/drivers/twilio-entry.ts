/**
 * Entry of click2call-twilio.js: the Twilio voice driver with @twilio/voice-sdk bundled in. The
 * call window loads this script (a <script> tag, same origin) only when it uses the Twilio
 * driver, so simulated windows never download the voice SDK. It defines one global,
 * C2CTwilioDriver, a factory of drivers.
 */
import { Device } from '@twilio/voice-sdk';
import { TwilioDriver } from './twilio.js';
import type { TwilioDriverFactory } from './load-twilio.js';

const factory: TwilioDriverFactory = {
  create: (options) => new TwilioDriver({ ...options, createDevice: (token, deviceOptions) => new Device(token, deviceOptions) }),
};

globalThis.C2CTwilioDriver = factory;
