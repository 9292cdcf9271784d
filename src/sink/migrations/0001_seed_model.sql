-- newsflow sink postgres, schema version 1: the seed's data model (docs/sink.md).
-- Applied by `newsflow sink postgres --migrate` in one transaction together with its row in
-- newsflow_schema; never edited once released: a change is a new file 0002_*.sql.

-- What the sink consumed, per consumer group and partition: the offset of the next record to
-- land. Written in the same transaction as the rows, so a restart seeks here (not to the
-- group's Kafka offsets) and every record lands once.
CREATE TABLE newsflow_sink_offsets (
    group_id    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL CHECK (partition >= 0),
    next_offset bigint      NOT NULL CHECK (next_offset >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic, partition)
);

-- articles: one row per article_id, the last record of it wins.
CREATE TABLE article (
    article_id      text        PRIMARY KEY,
    url             text        NOT NULL,
    link            text,
    guid            text,
    source_id       text        NOT NULL,
    feed_url        text        NOT NULL,
    title           text        NOT NULL,
    summary         text        NOT NULL,
    body            text        NOT NULL,
    authors         jsonb       NOT NULL CHECK (jsonb_typeof(authors) = 'array'),
    categories      text[]      NOT NULL,
    category_labels jsonb       NOT NULL CHECK (jsonb_typeof(category_labels) = 'array'),
    topics          jsonb       NOT NULL CHECK (jsonb_typeof(topics) = 'object'),
    language        text,
    published_at    timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    date_fallback   boolean     NOT NULL,
    ingested_at     timestamptz NOT NULL,
    content_hash    text        NOT NULL,
    -- the story the article belongs to now (story-clusters; merges followed)
    cluster_id      text
);
CREATE INDEX article_url ON article (url);
CREATE INDEX article_published ON article (published_at DESC);
CREATE INDEX article_cluster ON article (cluster_id);

-- An article's topics (classify), for "recent articles of a category".
CREATE TABLE article_topic (
    topic        text             NOT NULL,
    article_id   text             NOT NULL,
    weight       double precision NOT NULL,
    published_at timestamptz      NOT NULL,
    PRIMARY KEY (topic, article_id)
);
CREATE INDEX article_topic_recent ON article_topic (topic, published_at DESC);
CREATE INDEX article_topic_article ON article_topic (article_id);

-- story-clusters: a story is its root cluster; a merged cluster points at the root it went
-- into (kept flat: merged_into is always a root).
CREATE TABLE story_cluster (
    cluster_id  text        PRIMARY KEY,
    merged_into text,
    first_seen  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX story_cluster_merged ON story_cluster (merged_into) WHERE merged_into IS NOT NULL;

CREATE TABLE story_member (
    article_id text             PRIMARY KEY,
    cluster_id text             NOT NULL,
    action     text             NOT NULL CHECK (action IN ('new', 'joined', 'merged')),
    similarity double precision NOT NULL,
    joined_at  timestamptz      NOT NULL
);
CREATE INDEX story_member_cluster ON story_member (cluster_id, joined_at DESC);

-- The stories as a reader sees them: roots with their members.
CREATE VIEW story AS
SELECT m.cluster_id, count(*) AS size, min(m.joined_at) AS first_joined,
       max(m.joined_at) AS last_joined
FROM story_member m GROUP BY m.cluster_id;

-- interest-updates: every version of each reader's vector, each once (the sink deletes versions
-- that landed more than postgres.retention_days ago, never a reader's latest: landed, not
-- updated, so that a replay of old events keeps its history).
CREATE TABLE user_interest_version (
    user_id    text        NOT NULL,
    version    bigint      NOT NULL CHECK (version >= 1),
    updated_at timestamptz NOT NULL,
    vector     jsonb       NOT NULL CHECK (jsonb_typeof(vector) = 'object'),
    landed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, version, updated_at)
);
CREATE INDEX user_interest_version_landed ON user_interest_version (landed_at);

-- A reader's interest now: the highest version (a view over the versions, served by the
-- primary key: the sink writes each record once instead of also rewriting a current row).
CREATE VIEW user_interest AS
SELECT DISTINCT ON (user_id) user_id, version, vector, updated_at
FROM user_interest_version
ORDER BY user_id, version DESC, updated_at DESC;

-- trending: one snapshot per window, its items ranked from 1 (deleted, like interest
-- versions, postgres.retention_days after they landed).
CREATE TABLE trending_snapshot (
    window_end   timestamptz PRIMARY KEY,
    window_start timestamptz NOT NULL,
    landed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX trending_snapshot_landed ON trending_snapshot (landed_at);
CREATE TABLE trending_item (
    window_end timestamptz      NOT NULL,
    rank       integer          NOT NULL CHECK (rank >= 1),
    article_id text             NOT NULL,
    score      double precision NOT NULL CHECK (score >= 0),
    PRIMARY KEY (window_end, rank)
);

-- read-events (postgres.read_events): the readers' events, once each by event_id, which is
-- sha256(user, article, session[, kind]) unless the client named its own.
CREATE TABLE read_event (
    event_id   text        PRIMARY KEY,
    user_id    text        NOT NULL,
    article_id text        NOT NULL,
    session_id text        NOT NULL,
    kind       text        NOT NULL,
    ts         timestamptz NOT NULL
);
CREATE INDEX read_event_user ON read_event (user_id, ts DESC);
CREATE INDEX read_event_article ON read_event (article_id);

-- Cluster P_FROM went into P_INTO: everything of P_FROM (and of clusters merged into it
-- before) now belongs to P_INTO's root. Order-independent with the members' upserts: a member
-- that arrives later resolves its cluster through merged_into.
CREATE FUNCTION newsflow_merge_story(p_into text, p_from text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    root text;
BEGIN
    SELECT COALESCE(merged_into, cluster_id) INTO root FROM story_cluster WHERE cluster_id = p_into;
    root := COALESCE(root, p_into);
    IF root = p_from THEN
        RETURN;
    END IF;
    INSERT INTO story_cluster (cluster_id) VALUES (root) ON CONFLICT (cluster_id) DO NOTHING;
    INSERT INTO story_cluster (cluster_id, merged_into) VALUES (p_from, root)
        ON CONFLICT (cluster_id) DO UPDATE SET merged_into = root;
    UPDATE story_cluster SET merged_into = root WHERE merged_into = p_from;
    UPDATE story_member SET cluster_id = root WHERE cluster_id = p_from;
    UPDATE article SET cluster_id = root WHERE cluster_id = p_from;
END
$$;
