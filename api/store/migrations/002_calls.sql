-- Call lifecycle: launch tickets, engines (paired call windows), call intents, widget commands
-- and the wallet ledger.

CREATE TABLE launch_tickets (
  id                 text PRIMARY KEY,
  widget_session_id  text NOT NULL REFERENCES widget_sessions(id) ON DELETE CASCADE,
  integration_id     text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  member_id          text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
  lookup             text NOT NULL UNIQUE,
  secret_hash        bytea NOT NULL,
  created_at         bigint NOT NULL,
  expires_at         bigint NOT NULL,
  consumed_at        bigint
);

CREATE TABLE engines (
  id               text PRIMARY KEY,
  integration_id   text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  member_id        text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
  lookup           text NOT NULL UNIQUE,
  secret_hash      bytea NOT NULL,
  client           text NOT NULL DEFAULT 'window' CHECK (client IN ('window', 'extension')),
  simulated        boolean NOT NULL DEFAULT false,
  state            text NOT NULL DEFAULT 'enabling' CHECK (state IN ('enabling', 'ready', 'offline', 'closed')),
  mic_ready        boolean NOT NULL DEFAULT false,
  available        boolean NOT NULL DEFAULT true,
  busy             boolean NOT NULL DEFAULT false,
  muted            boolean NOT NULL DEFAULT false,
  version          bigint NOT NULL DEFAULT 1,
  created_at       bigint NOT NULL,
  last_seen_at     bigint NOT NULL,
  closed_at        bigint,
  close_reason     text
);
-- One engine per agent per integration that is not closed: pairing a new window closes the old.
CREATE UNIQUE INDEX engines_one_per_agent ON engines (integration_id, member_id) WHERE state <> 'closed';

CREATE TABLE call_intents (
  id                  text PRIMARY KEY,
  integration_id      text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  account_id          text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  member_id           text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
  direction           text NOT NULL CHECK (direction IN ('outbound', 'inbound')),
  status              text NOT NULL,
  error               text,
  -- E.164: the destination (outbound) or the caller (inbound); never sent where the policy hides it
  phone_number        text NOT NULL,
  display_name        text,
  display_company     text,
  contact_reference   text,
  department          text,
  metadata            jsonb,
  -- frozen at creation: Policy, caller ID and rate
  policy              jsonb NOT NULL,
  caller_id           text,
  per_minute_micros   bigint NOT NULL DEFAULT 0,
  time_limit_seconds  integer,
  idempotency_key     text,
  request_hash        bytea,
  engine_id           text REFERENCES engines(id) ON DELETE SET NULL,
  provider_call_sid   text,
  provider_leg_sid    text,
  orphaned            boolean NOT NULL DEFAULT false,
  created_at          bigint NOT NULL,
  expires_at          bigint NOT NULL,
  claimed_at          bigint,
  dialing_at          bigint,
  ringing_at          bigint,
  answered_at         bigint,
  ended_at            bigint,
  hangup_requested_at bigint,
  end_reason          text,
  charge_micros       bigint,
  UNIQUE (integration_id, idempotency_key)
);
CREATE INDEX call_intents_agent ON call_intents (integration_id, member_id, created_at DESC);
CREATE INDEX call_intents_account_live ON call_intents (account_id) WHERE status IN ('queued', 'claimed', 'dialing', 'ringing', 'connected', 'incoming');
CREATE INDEX call_intents_integration_live ON call_intents (integration_id) WHERE status IN ('queued', 'claimed', 'dialing', 'ringing', 'connected', 'incoming');
CREATE UNIQUE INDEX call_intents_provider_sid ON call_intents (provider_call_sid) WHERE provider_call_sid IS NOT NULL;

-- Widget commands: request_id is the client's id; a replay returns the first result.
CREATE TABLE widget_commands (
  id              bigserial PRIMARY KEY,
  integration_id  text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  member_id       text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
  request_id      text NOT NULL,
  kind            text NOT NULL,
  digits          text,
  available       boolean,
  call_id         text REFERENCES call_intents(id) ON DELETE SET NULL,
  engine_id       text REFERENCES engines(id) ON DELETE SET NULL,
  status          text NOT NULL CHECK (status IN ('queued', 'delivered', 'done', 'failed')),
  error           text,
  -- how many times the engine was handed this command (push or heartbeat) and acked it
  deliveries      integer NOT NULL DEFAULT 0,
  acks            integer NOT NULL DEFAULT 0,
  created_at      bigint NOT NULL,
  delivered_at    bigint,
  done_at         bigint,
  UNIQUE (integration_id, member_id, request_id)
);
CREATE INDEX widget_commands_pending ON widget_commands (engine_id) WHERE status IN ('queued', 'delivered');

-- One debit per call, ever.
CREATE TABLE wallet_ledger (
  id              bigserial PRIMARY KEY,
  account_id      text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  call_id         text UNIQUE REFERENCES call_intents(id) ON DELETE SET NULL,
  amount_micros   bigint NOT NULL,
  reason          text NOT NULL,
  created_at      bigint NOT NULL
);
