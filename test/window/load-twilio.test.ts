// @vitest-environment happy-dom
/**
 * The Twilio driver script is added to the window on demand (window/src/drivers/load-twilio.ts). A
 * failed load leaves no tag behind: the engine loads it again later, and each attempt must add one
 * tag, not one more beside those of every earlier attempt. (happy-dom fetches no script: it reports
 * each as failed, or, with handleDisabledFileLoadingAsSuccess, as loaded without running it.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadTwilioDriver } from '../../window/src/drivers/load-twilio.js';

const settings = (globalThis as unknown as { happyDOM: { settings: { handleDisabledFileLoadingAsSuccess: boolean } } }).happyDOM.settings;
const scripts = () => document.head.querySelectorAll('script');

describe('loading the Twilio driver script', () => {
  afterEach(() => {
    settings.handleDisabledFileLoadingAsSuccess = false;
    for (const script of scripts()) script.remove();
    delete globalThis.C2CTwilioDriver;
  });

  it('removes its tag when the script could not be loaded', async () => {
    await expect(loadTwilioDriver(document, '/assets/js/missing.js')).rejects.toThrow('could not be loaded');
    expect(scripts()).toHaveLength(0);
  });

  it("removes its tag when the script loaded but defined no driver (a proxy's page, a deploy gap)", async () => {
    settings.handleDisabledFileLoadingAsSuccess = true;
    await expect(loadTwilioDriver(document)).rejects.toThrow('defined no driver');
    expect(scripts()).toHaveLength(0);
  });

  it('resolves with the driver the script defined, and adds no tag once it is there', async () => {
    settings.handleDisabledFileLoadingAsSuccess = true;
    const factory = {
      create: () => {
        throw new Error('not in this test');
      },
    };
    globalThis.C2CTwilioDriver = factory;
    await expect(loadTwilioDriver(document)).resolves.toBe(factory);
    expect(scripts()).toHaveLength(0);
  });
});
