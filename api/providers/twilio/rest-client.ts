/**
 * The twilio library's HTTP client, sending to another origin than Twilio's (TWILIO_API_BASE_URL):
 * an egress proxy in production, and in tests a local server standing in for the few Twilio REST
 * endpoints the driver calls (this machine cannot reach Twilio). The path, the form body and the
 * credentials are the library's, unchanged.
 */
import twilio from 'twilio';

type RequestOptions<T> = Parameters<twilio.RequestClient['request']>[0] & { data?: T };

export class RebasedRequestClient extends twilio.RequestClient {
  readonly #base: URL;

  constructor(baseUrl: string, options: ConstructorParameters<typeof twilio.RequestClient>[0]) {
    super(options);
    this.#base = new URL(baseUrl);
  }

  override request<TData>(options: RequestOptions<TData>) {
    const uri = new URL(options.uri);
    uri.protocol = this.#base.protocol;
    uri.host = this.#base.host;
    return super.request<TData>({ ...options, uri: uri.href });
  }
}
