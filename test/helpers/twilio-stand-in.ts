/**
 * A local server standing in for the Twilio REST endpoint the Twilio driver calls (this machine
 * cannot reach Twilio): it records each request as Twilio would receive it (method, path, basic
 * credentials, form body) and answers what the test tells it to, as Twilio answers (JSON, its
 * error codes). The driver reaches it through TWILIO_API_BASE_URL.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Twilio credentials of the forms Twilio issues (set-provider checks them). */
export const TWILIO = {
  accountSid: `AC${'0a1b2c3d4e5f6789'.repeat(2)}`,
  authToken: '9f8e7d6c5b4a3210'.repeat(2),
  apiKey: { sid: `SK${'00112233445566778899aabbccddeeff'}`, secret: 'k3ysecretk3ysecretk3ysecretk3yse' },
  twimlAppSid: `AP${'ffeeddccbbaa99887766554433221100'}`,
} as const;

export interface TwilioRequest {
  method: string;
  path: string;
  /** the basic credentials, decoded: user and password */
  user: string;
  password: string;
  form: Record<string, string>;
}

/** How the stand-in answers one request: a status and body, or no answer at all (a hung connection). */
export type TwilioAnswer = { status: number; body: Record<string, unknown> } | 'hang';

export interface TwilioStandIn {
  url: string;
  requests: TwilioRequest[];
  /** answers the next requests this way (by default a call resource, completed), perhaps after doing something first */
  answer(next: (request: TwilioRequest) => TwilioAnswer | Promise<TwilioAnswer>): void;
  close(): Promise<void>;
}

/** Twilio's answer to a list of the account's calls (`GET …/Calls.json?ParentCallSid=…`): one page, the last. */
export const callList = (calls: Array<Record<string, unknown>>): TwilioAnswer => ({
  status: 200,
  body: { calls, first_page_uri: '/calls', next_page_uri: null, previous_page_uri: null, page: 0, page_size: 20, start: 0, end: calls.length - 1, uri: '/calls' },
});

/** Twilio's answer to a call updated to completed: the call resource. To a list of the account's calls: none. */
export const completedCall = (request: TwilioRequest): TwilioAnswer =>
  /\/Calls\.json(\?|$)/.test(request.path)
    ? callList([])
    : { status: 200, body: { sid: request.path.match(/Calls\/([^/.]+)\.json$/)?.[1] ?? '', status: 'completed', account_sid: request.user } };

/** Twilio's error body: `code` is what the driver tells "ended already" from a failure by. */
export const twilioError = (status: number, code: number, message: string): TwilioAnswer => ({
  status,
  body: { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status },
});

export async function startTwilioStandIn(): Promise<TwilioStandIn> {
  const requests: TwilioRequest[] = [];
  let respond: (request: TwilioRequest) => TwilioAnswer | Promise<TwilioAnswer> = completedCall;
  const hung: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', async () => {
      const [user = '', password = ''] = Buffer.from((req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString('utf8').split(':');
      const request: TwilioRequest = { method: req.method ?? '', path: req.url ?? '', user, password, form: Object.fromEntries(new URLSearchParams(body)) };
      requests.push(request);
      const answer = await respond(request);
      if (answer === 'hang') return void hung.push(res);
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    answer: (next) => void (respond = next),
    async close() {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
