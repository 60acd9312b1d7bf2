-- The phone numbers whose incoming calls an integration takes (Twilio: each number's voice URL is
-- this service's incoming webhook, api/routes/provider/incoming.ts). A number is one
-- integration's; its calls ring that integration's agents.
CREATE TABLE incoming_numbers (
  number          text PRIMARY KEY,
  integration_id  text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  created_at      bigint NOT NULL
);
CREATE INDEX incoming_numbers_integration ON incoming_numbers (integration_id);

