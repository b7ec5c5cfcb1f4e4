-- 0014: webhooks out (issue 30): the endpoints an application registers,
-- the events to deliver to them, and each attempt's record.
--
-- An event is born in the transaction that changes what it tells of: a
-- trigger on messages, delivery_events and suppressions writes it to
-- webhook_outbox, so that a crash can neither lose one (the change
-- committed, its event too) nor invent one (rolled back together). The
-- server's relay (skuld/outbox) takes outbox rows in order and, in one
-- transaction, writes each as a webhook_events row and one River job per
-- endpoint that wants it, and deletes it. The trigger writes nothing
-- while no endpoint is enabled: a server without webhooks pays one
-- indexed lookup per status change.
CREATE TABLE webhook_endpoints (
    id                 TEXT        PRIMARY KEY,
    url                TEXT        NOT NULL,
    events             TEXT        NOT NULL,   -- JSON array of event types
    description        TEXT        NOT NULL DEFAULT '',
    enabled            BOOLEAN     NOT NULL DEFAULT TRUE,
    disabled_reason    TEXT,
    secret             TEXT        NOT NULL,
    -- The secret before the last rotation, which signs beside the new one
    -- until previous_until.
    previous_secret    TEXT,
    previous_until     TIMESTAMPTZ,
    -- When its current streak of failed attempts began (NULL after a
    -- success): 100 in a row over an hour, or 5 days, disables it.
    failing_since      TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_endpoints_enabled_idx ON webhook_endpoints (enabled);

CREATE TABLE webhook_outbox (
    seq         BIGSERIAL   PRIMARY KEY,
    type        TEXT        NOT NULL,
    message_id  TEXT,
    status      TEXT,
    recipient   TEXT,
    detail      TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- An event as delivered: its id is the webhook-id header, and payload the
-- exact body every attempt and replay sends.
CREATE TABLE webhook_events (
    id          TEXT        PRIMARY KEY,
    type        TEXT        NOT NULL,
    payload     TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
    id             TEXT        PRIMARY KEY,
    endpoint_id    TEXT        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id       TEXT        NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    event_type     TEXT        NOT NULL,
    attempt        INTEGER     NOT NULL,
    status_code    INTEGER,
    latency_ms     BIGINT      NOT NULL,
    error          TEXT,
    response_body  TEXT,
    next_retry_at  TIMESTAMPTZ,
    created_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at, id);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);

CREATE FUNCTION webhook_message_event() RETURNS trigger AS $$
BEGIN
    IF NEW.status IN ('scheduled', 'queued', 'sent', 'failed', 'canceled')
       AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status
            OR (NEW.status = 'scheduled' AND OLD.scheduled_at IS DISTINCT FROM NEW.scheduled_at))
       AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled) THEN
        INSERT INTO webhook_outbox (type, message_id, status, detail)
        VALUES ('message.' || NEW.status, NEW.id, NEW.status, NEW.error);
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER messages_webhook_event AFTER INSERT OR UPDATE OF status, scheduled_at ON messages
    FOR EACH ROW EXECUTE FUNCTION webhook_message_event();

CREATE FUNCTION webhook_delivery_event() RETURNS trigger AS $$
BEGIN
    IF NEW.type IN ('delivered', 'bounced', 'complained', 'delayed')
       AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled) THEN
        INSERT INTO webhook_outbox (type, message_id, recipient, detail)
        VALUES ('message.' || NEW.type, NEW.message_id, NEW.recipient,
                NULLIF(concat_ws(' ', NEW.bounce_type, NEW.smtp_status, NEW.diagnostic), ''));
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER delivery_events_webhook_event AFTER INSERT ON delivery_events
    FOR EACH ROW EXECUTE FUNCTION webhook_delivery_event();

CREATE FUNCTION webhook_suppression_event() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled) THEN
        INSERT INTO webhook_outbox (type, message_id, recipient, detail)
        VALUES ('recipient.suppressed', NEW.message_id, NEW.email, NEW.reason);
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER suppressions_webhook_event AFTER INSERT ON suppressions
    FOR EACH ROW EXECUTE FUNCTION webhook_suppression_event();
