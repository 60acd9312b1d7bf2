/**
 * Every text a user of the call window can see, in one place, in English and French. The window
 * speaks its browser's language until it has paired, then the integration's widget language
 * (policy.widget.language, the widget's own default), as the widget does; other languages fall back
 * to English. The exports are live: useLanguage() switches what every module reads from then on.
 */
import type { CallStatus } from '../../shared/types.js';
import { driverRefusal, type DriverRefusal } from './drivers/types.js';

export type WindowState = 'pairing' | 'confirm' | 'enabling' | 'no_mic' | 'ready' | 'call' | 'closed' | 'error';
export type WindowLanguage = 'en' | 'fr';

const EN = {
  messages: {
    keepOpen: 'Keep this window open during calls.',
    noTicket: 'Open the call window again from the widget.',
    openInAnotherTab: 'This call window is already open in another tab. Use that one, or close it and open the call window again from the widget.',
    ticketInvalid: 'This call window link has expired or was already used. Open the call window again from the widget.',
    agentBusy: 'Your other call window is on a call, so this one cannot take over yet. Finish that call, then click Try again.',
    unreachable: 'The click-to-call service could not be reached. Check your connection, then click Try again.',
    bootFailed: 'This page cannot start the call window. Open the call window again from the widget.',
    replaced: 'This call window was replaced by a newer one. You can close it.',
    // Said too when a newer window replaced this one but the window learnt it over REST, which can
    // only say unauthorized: reopening from the widget would then take over from that newer window.
    unauthorized: 'This call window is no longer signed in: a newer call window may have replaced it. Use that one, or open the call window again from the widget.',
    platformDisabled: 'Calling is switched off on this service right now.',
    integrationDisabled: 'Calling is switched off for this integration.',
    agentDisabled: 'Calls are not enabled for you on this integration.',
    micAsking: 'Allow the microphone when the browser asks, so you can talk on calls.',
    micDenied: 'Microphone access is blocked. Allow the microphone for this site in your browser (the icon in the address bar), then click Try again.',
    micMissing: 'No microphone was found. Connect one, then click Try again.',
    micBusy: 'The microphone is in use by another application. Free it, then click Try again.',
    micUnsupported: 'This browser cannot use a microphone on this page.',
    voiceUnavailable: 'The voice service is not available right now; retrying.',
    voiceScriptFailed: 'The voice component could not be loaded; retrying.',
    reconnecting: 'Connection to the service lost; retrying.',
    hangupUncertain: 'The voice provider could not be reached, so the call may still be up. Click Hang up again.',
    hangupFailed: 'The call could not be hung up. Try again.',
    connectFailed: 'The call could not be connected.',
    // why a widget's command could not be carried out (the widget shows it after its own prefix)
    deviceNotReady: 'The voice device is not ready.',
    voiceUnreachable: 'The voice service did not answer in time.',
    answerFailed: 'The call could not be answered.',
    otherCall: 'The command is for another call than the one this window holds.',
    callOver: 'The call the command is for is no longer up in this window.',
    dtmfNoDigits: 'A dtmf command needs digits.',
    // a voice driver's refusals (DriverRefusal)
    alreadyOnCall: 'This window is already on a call.',
    nothingRinging: 'No incoming call is ringing in this window.',
    otherRinging: 'Another call than the one answered is ringing in this window.',
    noDeviceCall: 'There is no call up in this window.',
    dtmfDigits: 'Digits may be 0-9, * and # only.',
    // the voice provider's errors (voiceErrorText): {code} is its own error code, for support
    voiceSignIn: 'The voice service did not accept this window’s sign-in (code {code}).',
    voiceConnection: 'The connection to the voice service was interrupted (code {code}).',
    voiceMedia: 'The call’s audio could not get through: the network or a firewall may be blocking it (code {code}).',
    voiceTooMany: 'The voice service is receiving too many requests; try again in a moment (code {code}).',
    voiceOther: 'The voice service reported an error (code {code}).',
    voiceUnknown: 'The voice service reported an error.',
    /** a registration for incoming calls that failed: {reason} is one of the texts above */
    incomingUnavailable: 'Incoming calls cannot ring this window. {reason}',
    // asked the first time this browser pairs for an agent (consent.ts): {agent} is the agent's name and identifier,
    // {integration} the integration's name (yourCrm where the pair answer has none)
    consentQuestion: 'Use this window for the calls of {agent} in {integration}? Calls will use this computer’s microphone. Only continue if you opened it yourself, from {integration}.',
    yourCrm: 'your CRM',
    consentDeclined: 'This window will not carry those calls. You can close it.',
  },
  /** What the window's state element says. */
  states: {
    pairing: 'Connecting…',
    confirm: 'Confirm to continue',
    enabling: 'Waiting for the microphone…',
    no_mic: 'No microphone',
    ready: 'Ready for calls',
    call: 'On a call',
    closed: 'Closed',
    error: 'Not connected',
  } satisfies Record<WindowState, string>,
  /** The call status element's text: the server's status, or `ended` once the window lost sight of it. */
  calls: {
    queued: 'Starting…',
    claimed: 'Connecting…',
    dialing: 'Dialing…',
    ringing: 'Ringing…',
    connected: 'Connected',
    incoming: 'Incoming call',
    completed: 'Call ended',
    rejected: 'Declined',
    busy: 'Busy',
    no_answer: 'No answer',
    canceled: 'Canceled',
    failed: 'Call failed',
    expired: 'Not picked up in time',
    ended: 'Call ended',
  } satisfies Record<CallStatus | 'ended', string>,
  /** Buttons, headings and the page title. */
  ui: {
    mute: 'Mute',
    unmute: 'Unmute',
    hangup: 'Hang up',
    answer: 'Answer',
    tryAgain: 'Try again',
    live: 'Live',
    polling: 'Polling',
    incoming: 'Incoming call',
    /** the incoming call's caller, for screen readers ({who}: a name or number) */
    incomingFrom: 'Incoming call: {who}',
    outgoing: 'Outgoing call',
    /** the enabling state's label once the microphone is granted: the voice line is what it waits for */
    voiceStarting: 'Starting the voice line…',
    title: 'Call window',
    consentYes: 'Use this window for my calls',
    consentNo: 'Not me',
  },
};

type WindowTexts = typeof EN;

const FR: WindowTexts = {
  messages: {
    keepOpen: 'Gardez cette fenêtre ouverte pendant les appels.',
    noTicket: 'Ouvrez à nouveau la fenêtre d’appel depuis le widget.',
    openInAnotherTab: 'Cette fenêtre d’appel est déjà ouverte dans un autre onglet. Utilisez celui-là, ou fermez-le et rouvrez la fenêtre d’appel depuis le widget.',
    ticketInvalid: 'Ce lien de fenêtre d’appel a expiré ou a déjà servi. Ouvrez à nouveau la fenêtre d’appel depuis le widget.',
    agentBusy: 'Votre autre fenêtre d’appel est en communication : celle-ci ne peut pas encore prendre le relais. Terminez cet appel, puis cliquez sur Réessayer.',
    unreachable: 'Le service d’appel est injoignable. Vérifiez votre connexion, puis cliquez sur Réessayer.',
    bootFailed: 'Cette page ne peut pas démarrer la fenêtre d’appel. Ouvrez à nouveau la fenêtre d’appel depuis le widget.',
    replaced: 'Cette fenêtre d’appel a été remplacée par une plus récente. Vous pouvez la fermer.',
    unauthorized: 'Cette fenêtre d’appel n’est plus connectée : une fenêtre d’appel plus récente l’a peut-être remplacée. Utilisez celle-là, ou ouvrez à nouveau la fenêtre d’appel depuis le widget.',
    platformDisabled: 'Les appels sont désactivés sur ce service pour le moment.',
    integrationDisabled: 'Les appels sont désactivés pour cette intégration.',
    agentDisabled: 'Les appels ne sont pas activés pour vous dans cette intégration.',
    micAsking: 'Autorisez le micro quand le navigateur le demande, pour pouvoir parler pendant les appels.',
    micDenied: 'L’accès au micro est bloqué. Autorisez le micro pour ce site dans votre navigateur (l’icône dans la barre d’adresse), puis cliquez sur Réessayer.',
    micMissing: 'Aucun micro n’a été trouvé. Branchez-en un, puis cliquez sur Réessayer.',
    micBusy: 'Le micro est utilisé par une autre application. Libérez-le, puis cliquez sur Réessayer.',
    micUnsupported: 'Ce navigateur ne peut pas utiliser de micro sur cette page.',
    voiceUnavailable: 'Le service vocal n’est pas disponible pour le moment ; nouvel essai en cours.',
    voiceScriptFailed: 'Le composant vocal n’a pas pu être chargé ; nouvel essai en cours.',
    reconnecting: 'Connexion au service perdue ; nouvel essai en cours.',
    hangupUncertain: 'Le fournisseur vocal est injoignable : l’appel est peut-être encore en cours. Cliquez à nouveau sur Raccrocher.',
    hangupFailed: 'L’appel n’a pas pu être raccroché. Réessayez.',
    connectFailed: 'L’appel n’a pas pu être établi.',
    deviceNotReady: 'Le périphérique vocal n’est pas prêt.',
    voiceUnreachable: 'Le service vocal n’a pas répondu à temps.',
    answerFailed: 'L’appel n’a pas pu être pris.',
    otherCall: 'La commande concerne un autre appel que celui de cette fenêtre.',
    callOver: 'L’appel visé par la commande n’est plus en cours dans cette fenêtre.',
    dtmfNoDigits: 'Une commande dtmf demande des chiffres.',
    alreadyOnCall: 'Cette fenêtre est déjà en communication.',
    nothingRinging: 'Aucun appel entrant ne sonne dans cette fenêtre.',
    otherRinging: 'Un autre appel que celui décroché sonne dans cette fenêtre.',
    noDeviceCall: 'Aucun appel n’est en cours dans cette fenêtre.',
    dtmfDigits: 'Les touches possibles sont 0-9, * et # uniquement.',
    voiceSignIn: 'Le service vocal n’a pas accepté l’identification de cette fenêtre (code {code}).',
    voiceConnection: 'La connexion au service vocal a été interrompue (code {code}).',
    voiceMedia: 'Le son de l’appel ne passe pas : le réseau ou un pare-feu le bloque peut-être (code {code}).',
    voiceTooMany: 'Le service vocal reçoit trop de demandes ; réessayez dans un instant (code {code}).',
    voiceOther: 'Le service vocal a signalé une erreur (code {code}).',
    voiceUnknown: 'Le service vocal a signalé une erreur.',
    incomingUnavailable: 'Les appels entrants ne peuvent pas sonner dans cette fenêtre. {reason}',
    consentQuestion: 'Utiliser cette fenêtre pour les appels de {agent} dans {integration} ? Les appels passeront par le micro de cet ordinateur. Ne continuez que si vous l’avez ouverte vous-même, depuis {integration}.',
    yourCrm: 'votre CRM',
    consentDeclined: 'Cette fenêtre ne prendra pas ces appels. Vous pouvez la fermer.',
  },
  states: {
    pairing: 'Connexion…',
    confirm: 'Confirmez pour continuer',
    enabling: 'En attente du micro…',
    no_mic: 'Pas de micro',
    ready: 'Prêt pour les appels',
    call: 'En communication',
    closed: 'Fermée',
    error: 'Non connectée',
  },
  calls: {
    queued: 'Démarrage…',
    claimed: 'Connexion…',
    dialing: 'Numérotation…',
    ringing: 'Sonnerie…',
    connected: 'En ligne',
    incoming: 'Appel entrant',
    completed: 'Appel terminé',
    rejected: 'Refusé',
    busy: 'Occupé',
    no_answer: 'Pas de réponse',
    canceled: 'Annulé',
    failed: 'Échec de l’appel',
    expired: 'Non pris à temps',
    ended: 'Appel terminé',
  },
  ui: {
    mute: 'Couper le micro',
    unmute: 'Réactiver le micro',
    hangup: 'Raccrocher',
    answer: 'Répondre',
    tryAgain: 'Réessayer',
    live: 'En direct',
    polling: 'Par interrogation',
    incoming: 'Appel entrant',
    incomingFrom: 'Appel entrant : {who}',
    outgoing: 'Appel sortant',
    voiceStarting: 'Démarrage de la ligne vocale…',
    title: 'Fenêtre d’appel',
    consentYes: 'Utiliser cette fenêtre pour mes appels',
    consentNo: 'Ce n’est pas moi',
  },
};

export let LANGUAGE: WindowLanguage = 'en';
export let MESSAGES = EN.messages;
export let STATE_LABELS = EN.states;
export let CALL_STATUS_LABELS = EN.calls;
export let UI_TEXTS = EN.ui;

/** Speaks the language of a tag ('fr', 'fr-CA' → French; anything else → English); returns it. */
export function useLanguage(tag: string | null | undefined): WindowLanguage {
  LANGUAGE = tag?.toLowerCase().startsWith('fr') ? 'fr' : 'en';
  const texts = LANGUAGE === 'fr' ? FR : EN;
  MESSAGES = texts.messages;
  STATE_LABELS = texts.states;
  CALL_STATUS_LABELS = texts.calls;
  UI_TEXTS = texts.ui;
  return LANGUAGE;
}

const DRIVER_TEXTS: Record<DriverRefusal, keyof typeof EN.messages> = {
  not_ready: 'deviceNotReady',
  on_call: 'alreadyOnCall',
  nothing_ringing: 'nothingRinging',
  other_ringing: 'otherRinging',
  no_call: 'noDeviceCall',
  bad_digits: 'dtmfDigits',
  unreachable: 'voiceUnreachable',
};

/**
 * What the agent reads for a thrown error, in the window's language where the window knows it (a
 * voice driver's refusal, whose own message is English); else the error's message.
 */
export function errorText(error: unknown, fallback: string): string {
  const refusal = driverRefusal(error);
  if (refusal) return MESSAGES[DRIVER_TEXTS[refusal]];
  return error instanceof Error && error.message ? error.message : fallback;
}

/**
 * Twilio's error codes, by what the agent is told of them (the rest: voiceOther). The SDK's own
 * messages are English and technical ("ConnectionError (53405): Raised by the Client or Server
 * whenever a media connection fails"); the full error goes to the console (drivers/twilio.ts).
 */
const VOICE_ERROR_TEXTS: Record<number, keyof typeof EN.messages> = {
  // the voice token or its signature refused: AccessTokenInvalid, AccessTokenExpired,
  // AuthenticationFailed, signature validation, InvalidJWTToken, JWTTokenExpired, expiry too long
  20101: 'voiceSignIn', 20104: 'voiceSignIn', 20151: 'voiceSignIn', 31202: 'voiceSignIn', 31204: 'voiceSignIn', 31205: 'voiceSignIn', 31207: 'voiceSignIn',
  // signalling lost: ConnectionError (call), TransportError, signalling ConnectionError, ConnectionDisconnected
  31005: 'voiceConnection', 31009: 'voiceConnection', 53000: 'voiceConnection', 53001: 'voiceConnection',
  // the audio path: ConnectionTimeoutError, local or remote description failed, media ConnectionError
  31003: 'voiceMedia', 53400: 'voiceMedia', 53402: 'voiceMedia', 53405: 'voiceMedia',
  31206: 'voiceTooMany', // RateExceededError
};

/** What the agent reads for a voice provider's error (a driver's `error` event), in the window's language. */
export function voiceErrorText(event: { code: number | null; lasting?: boolean }): string {
  const { code } = event;
  const reason = code === null ? MESSAGES.voiceUnknown : MESSAGES[Object.hasOwn(VOICE_ERROR_TEXTS, code) ? VOICE_ERROR_TEXTS[code]! : 'voiceOther'].replace('{code}', String(code));
  return event.lasting ? MESSAGES.incomingUnavailable.replace('{reason}', reason) : reason;
}

/**
 * What the window says for a refusal of its pairing or its token, in the language it speaks (read
 * when it happens): the service's own message is English and speaks of "members".
 */
export function refusalMessage(code: string): string | undefined {
  const messages: Record<string, string> = {
    replaced: MESSAGES.replaced,
    unauthorized: MESSAGES.unauthorized,
    platform_disabled: MESSAGES.platformDisabled,
    integration_disabled: MESSAGES.integrationDisabled,
    agent_disabled: MESSAGES.agentDisabled,
    agent_not_assigned: MESSAGES.agentDisabled,
    agent_unknown: MESSAGES.agentDisabled,
  };
  return Object.hasOwn(messages, code) ? messages[code] : undefined;
}
