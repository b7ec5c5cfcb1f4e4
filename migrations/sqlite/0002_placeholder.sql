-- 0002: placeholder on branch issue-7b only, so that 0003 follows without a
-- gap (TestLoad requires contiguous versions). The lead's
-- real 0002 replaces this file at merge; a leftover copy fails loudly
-- ("share version 2").
SELECT 1;
