/** The widget's texts in English and French (option `language`; other languages fall back to English). */
import type { CallStatus } from '../contract.js';
import type { WidgetStateName } from '../machine.js';

export interface Texts {
  states: Record<WidgetStateName, string>;
  calls: Record<CallStatus, string>;
  enable: string;
  answer: string;
  decline: string;
  hangup: string;
  mute: string;
  unmute: string;
  keypad: string;
  available: string;
  openTab: string;
  title: string;
  incoming: string;
  orphaned: string;
  ending: string;
  answering: string;
  didNotStart: string;
  popupBlocked: string;
  elsewhere: string;
  /** no_mic with the microphone granted: the window's voice line is what is not up yet */
  voiceNotReady: string;
  errors: Record<string, string>;
}

const en: Texts = {
  states: {
    init: 'Starting…',
    connecting: 'Connecting…',
    offline: 'Calls are off',
    enabling: 'Opening the call window…',
    ready: 'Ready for calls',
    unavailable: 'Not available',
    no_mic: 'Microphone not ready',
    call: 'On a call',
    reconnecting: 'Reconnecting…',
    unauthorized: 'Calls are not available for this session',
    error: 'Calls are unavailable',
  },
  calls: {
    queued: 'Waiting for the call window…',
    claimed: 'Starting the call…',
    dialing: 'Dialing…',
    ringing: 'Ringing…',
    connected: 'Connected',
    incoming: 'Incoming call',
    completed: 'Call ended',
    rejected: 'Call declined',
    busy: 'Busy',
    no_answer: 'No answer',
    canceled: 'Call canceled',
    failed: 'The call failed',
    expired: 'The call did not start',
  },
  enable: 'Enable calls',
  answer: 'Answer',
  decline: 'Decline',
  hangup: 'Hang up',
  mute: 'Mute',
  unmute: 'Unmute',
  keypad: 'Keypad',
  available: 'Available',
  openTab: 'Open in new tab',
  title: 'Calls',
  incoming: 'Incoming call',
  orphaned: 'The call window lost this call. Hang up to end it.',
  ending: 'Ending the call…',
  answering: 'Answering…',
  didNotStart: 'The call did not start',
  popupBlocked: 'The browser blocked the call window.',
  elsewhere: 'The call window is open elsewhere. Select Enable calls again to open it here.',
  voiceNotReady: 'Call window not ready',
  errors: {
    hangup_uncertain: 'The hangup could not be confirmed; the call may still be up. Try again.',
    unreachable: 'The service could not be reached.',
    control_not_allowed: 'This control is not enabled.',
    invalid_state: 'Not possible in the call’s current state.',
    command_failed: 'The call window could not do this',
    rate_limited: 'Too many requests; try again shortly.',
  },
};

const fr: Texts = {
  states: {
    init: 'Démarrage…',
    connecting: 'Connexion…',
    offline: 'Appels désactivés',
    enabling: 'Ouverture de la fenêtre d’appel…',
    ready: 'Prêt pour les appels',
    unavailable: 'Indisponible',
    no_mic: 'Micro non prêt',
    call: 'En communication',
    reconnecting: 'Reconnexion…',
    unauthorized: 'Les appels ne sont pas disponibles pour cette session',
    error: 'Appels indisponibles',
  },
  calls: {
    queued: 'En attente de la fenêtre d’appel…',
    claimed: 'Démarrage de l’appel…',
    dialing: 'Numérotation…',
    ringing: 'Sonnerie…',
    connected: 'En ligne',
    incoming: 'Appel entrant',
    completed: 'Appel terminé',
    rejected: 'Appel refusé',
    busy: 'Occupé',
    no_answer: 'Pas de réponse',
    canceled: 'Appel annulé',
    failed: 'L’appel a échoué',
    expired: 'L’appel n’a pas démarré',
  },
  enable: 'Activer les appels',
  answer: 'Répondre',
  decline: 'Refuser',
  hangup: 'Raccrocher',
  mute: 'Couper le micro',
  unmute: 'Réactiver le micro',
  keypad: 'Clavier',
  available: 'Disponible',
  openTab: 'Ouvrir dans un nouvel onglet',
  title: 'Appels',
  incoming: 'Appel entrant',
  orphaned: 'La fenêtre d’appel a perdu cet appel. Raccrochez pour y mettre fin.',
  ending: 'Fin de l’appel…',
  answering: 'Prise de l’appel…',
  didNotStart: 'L’appel n’a pas démarré',
  popupBlocked: 'Le navigateur a bloqué la fenêtre d’appel.',
  elsewhere: 'La fenêtre d’appel est ouverte ailleurs. Choisissez à nouveau Activer les appels pour l’ouvrir ici.',
  voiceNotReady: 'Fenêtre d’appel pas prête',
  errors: {
    hangup_uncertain: 'Le raccrochage n’a pas pu être confirmé ; l’appel est peut-être encore en cours. Réessayez.',
    unreachable: 'Le service est injoignable.',
    control_not_allowed: 'Cette commande n’est pas activée.',
    invalid_state: 'Impossible dans l’état actuel de l’appel.',
    command_failed: 'La fenêtre d’appel n’a pas pu le faire',
    rate_limited: 'Trop de requêtes ; réessayez dans un instant.',
  },
};

/** Texts for a language tag ('fr', 'fr-CA' → French; anything else → English). */
export function textsFor(language: string | undefined): Texts {
  return language?.toLowerCase().startsWith('fr') ? fr : en;
}

/** The language actually used for a tag, for the widget's lang attribute. */
export const langOf = (language: string | undefined): 'en' | 'fr' => (language?.toLowerCase().startsWith('fr') ? 'fr' : 'en');
