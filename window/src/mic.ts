/**
 * The microphone: asked once with getUserMedia({audio: true}) and released at once (the voice
 * SDK opens its own stream on a call; the permission stays granted). A permission change later
 * (the user allows or blocks it in the address bar, or resets it) is watched where the browser
 * supports it, and so are microphones plugged in or out.
 */

export type MicState = 'asking' | 'ready' | 'denied' | 'missing' | 'busy' | 'unsupported';

/** Asks for the microphone and says how it went. */
export async function askMicrophone(media: Pick<MediaDevices, 'getUserMedia'> | undefined): Promise<MicState> {
  if (!media || typeof media.getUserMedia !== 'function') return 'unsupported';
  try {
    const stream = await media.getUserMedia({ audio: true });
    for (const track of stream.getTracks()) track.stop();
    return 'ready';
  } catch (error) {
    const name = error instanceof Error || (error && typeof error === 'object') ? String((error as { name?: unknown }).name) : '';
    if (name === 'NotAllowedError' || name === 'SecurityError' || name === 'PermissionDeniedError') return 'denied';
    if (name === 'NotFoundError' || name === 'OverconstrainedError' || name === 'DevicesNotFoundError') return 'missing';
    if (name === 'NotReadableError' || name === 'AbortError' || name === 'TrackStartError') return 'busy';
    return 'denied';
  }
}

/** Calls back with 'granted' | 'denied' | 'prompt' when the microphone permission changes. */
export async function watchMicPermission(permissions: Permissions | undefined, onChange: (state: PermissionState) => void): Promise<void> {
  if (!permissions || typeof permissions.query !== 'function') return;
  try {
    const status = await permissions.query({ name: 'microphone' as PermissionName });
    status.onchange = () => onChange(status.state);
  } catch {
    // Firefox and Safari may not know the 'microphone' permission name: nothing to watch.
  }
}

/** Calls back whether any microphone is left when the browser's media devices change (one plugged in or out). */
export function watchMicDevices(media: Pick<MediaDevices, 'enumerateDevices' | 'addEventListener'> | undefined, onChange: (present: boolean) => void): void {
  if (!media || typeof media.addEventListener !== 'function' || typeof media.enumerateDevices !== 'function') return;
  media.addEventListener('devicechange', () => {
    media.enumerateDevices().then(
      (devices) => onChange(devices.some((device) => device.kind === 'audioinput')),
      () => undefined, // nothing known: the next call finds out
    );
  });
}
