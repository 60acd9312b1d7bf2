/**
 * The widget's texts in English and French (option `language`; other languages fall back to
 * English). Every code of the error catalogue has its text in each language, so a refusal reads in
 * the widget's language; a code the SDK does not know reads as `unexpected`.
 */
import type { ErrorCode } from '../../../shared/error-statuses.js';
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
  /** the catalogue's codes, and `unreachable` (also the SDK's own for a network failure) */
  errors: Record<ErrorCode, string>;
  /** a refusal whose code is not in the catalogue (an integrator endpoint's own, say) */
  unexpected: string;
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
    origin_not_allowed: 'This page is not allowed to make calls.',
    agent_unknown: 'Your user is not known to the calling service.',
    agent_ambiguous: 'Your user matches more than one calling account.',
    agent_not_assigned: 'Calls are not enabled for you in this application.',
    agent_disabled: 'Calls are disabled for you.',
    identifier_mode: 'This application identifies you in a way the calling service does not accept.',
    integration_disabled: 'Calls are disabled for this application.',
    platform_disabled: 'The calling service is switched off.',
    agent_offline: 'Open the call window first (Enable calls).',
    agent_not_ready: 'The call window has no microphone yet.',
    agent_busy: 'You are already on a call.',
    outbound_not_allowed: 'You are not allowed to make outgoing calls.',
    invalid_phone_number: 'This phone number is not valid.',
    destination_not_allowed: 'Calls to this destination are not allowed.',
    destination_blocked: 'This number is on the do-not-call list.',
    concurrency_limit: 'Too many calls are in progress for this application; try again shortly.',
    insufficient_balance: 'The account balance does not cover a call.',
    no_caller_id: 'No caller ID is set up for outgoing calls.',
    idempotency_conflict: 'This call request was already used for another call.',
    rate_limited: 'Too many requests; try again shortly.',
    hangup_uncertain: 'The hangup could not be confirmed; the call may still be up. Try again.',
    unreachable: 'The service could not be reached.',
    unauthorized: 'Your calling session has ended. Reload the page.',
    ticket_invalid: 'The call window link has expired. Select Enable calls again.',
    integration_mismatch: 'This application is set up for another integration.',
    control_not_allowed: 'This control is not enabled.',
    invalid_state: 'Not possible in the call’s current state.',
    command_failed: 'The call window could not do this',
    invalid_request: 'The request was not valid.',
    not_found: 'The call could not be found.',
    signature_invalid: 'The request could not be verified.',
    provider_unavailable: 'The voice service is not available right now; try again shortly.',
    service_unavailable: 'The service is briefly unavailable; try again shortly.',
    internal_error: 'Something went wrong on the service; try again.',
  },
  unexpected: 'Something went wrong; try again.',
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
    origin_not_allowed: 'Cette page n’est pas autorisée à passer des appels.',
    agent_unknown: 'Votre utilisateur est inconnu du service d’appel.',
    agent_ambiguous: 'Votre utilisateur correspond à plusieurs comptes d’appel.',
    agent_not_assigned: 'Les appels ne sont pas activés pour vous dans cette application.',
    agent_disabled: 'Les appels sont désactivés pour vous.',
    identifier_mode: 'Cette application vous identifie d’une façon que le service d’appel n’accepte pas.',
    integration_disabled: 'Les appels sont désactivés pour cette application.',
    platform_disabled: 'Le service d’appel est arrêté.',
    agent_offline: 'Ouvrez d’abord la fenêtre d’appel (Activer les appels).',
    agent_not_ready: 'La fenêtre d’appel n’a pas encore de micro.',
    agent_busy: 'Vous êtes déjà en communication.',
    outbound_not_allowed: 'Vous n’êtes pas autorisé à passer des appels sortants.',
    invalid_phone_number: 'Ce numéro de téléphone n’est pas valide.',
    destination_not_allowed: 'Les appels vers cette destination ne sont pas autorisés.',
    destination_blocked: 'Ce numéro figure sur la liste d’opposition.',
    concurrency_limit: 'Trop d’appels en cours pour cette application ; réessayez dans un instant.',
    insufficient_balance: 'Le solde du compte ne couvre pas un appel.',
    no_caller_id: 'Aucun numéro d’appelant n’est configuré pour les appels sortants.',
    idempotency_conflict: 'Cette demande d’appel a déjà servi pour un autre appel.',
    rate_limited: 'Trop de requêtes ; réessayez dans un instant.',
    hangup_uncertain: 'Le raccrochage n’a pas pu être confirmé ; l’appel est peut-être encore en cours. Réessayez.',
    unreachable: 'Le service est injoignable.',
    unauthorized: 'Votre session d’appel a pris fin. Rechargez la page.',
    ticket_invalid: 'Le lien de la fenêtre d’appel a expiré. Choisissez à nouveau Activer les appels.',
    integration_mismatch: 'Cette application est configurée pour une autre intégration.',
    control_not_allowed: 'Cette commande n’est pas activée.',
    invalid_state: 'Impossible dans l’état actuel de l’appel.',
    command_failed: 'La fenêtre d’appel n’a pas pu le faire',
    invalid_request: 'La demande n’était pas valide.',
    not_found: 'L’appel est introuvable.',
    signature_invalid: 'La demande n’a pas pu être vérifiée.',
    provider_unavailable: 'Le service vocal n’est pas disponible pour le moment ; réessayez dans un instant.',
    service_unavailable: 'Le service est brièvement indisponible ; réessayez dans un instant.',
    internal_error: 'Une erreur s’est produite sur le service ; réessayez.',
  },
  unexpected: 'Une erreur s’est produite ; réessayez.',
};

/** Texts for a language tag ('fr', 'fr-CA' → French; anything else → English). */
export function textsFor(language: string | undefined): Texts {
  return language?.toLowerCase().startsWith('fr') ? fr : en;
}

/** The language actually used for a tag, for the widget's lang attribute. */
export const langOf = (language: string | undefined): 'en' | 'fr' => (language?.toLowerCase().startsWith('fr') ? 'fr' : 'en');
