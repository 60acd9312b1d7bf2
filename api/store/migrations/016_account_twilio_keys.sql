-- What the Twilio driver needs beyond the account SID and auth token (api/providers/twilio/):
-- access tokens for the call window are signed with an API key (its SID and secret), and carry
-- the TwiML App whose voice URL is this service's voice webhook. Empty on the simulated
-- provider's accounts, and until `c2c account set-provider` gives them. Only adds columns.
ALTER TABLE accounts ADD COLUMN provider_api_key_sid text;
ALTER TABLE accounts ADD COLUMN provider_api_key_secret text;
ALTER TABLE accounts ADD COLUMN provider_twiml_app_sid text;
