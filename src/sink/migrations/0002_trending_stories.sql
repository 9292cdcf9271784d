-- newsflow sink postgres, schema version 2: trending by story (docs/sink.md). Each trending
-- item is a story now: its lead article (article_id, as before), the story's score, its id and
-- how many of its articles the window read. Items landed before this version have NULL in both
-- (they were ranked by article: each its own story, one article read).
ALTER TABLE trending_item ADD COLUMN cluster_id text;
ALTER TABLE trending_item ADD COLUMN articles integer CHECK (articles >= 1);
