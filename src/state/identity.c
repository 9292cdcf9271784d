/* identity.c — see identity.h. */
#include "state/identity.h"

#include "runtime/buildinfo.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_NAME "identity"

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* This build's record of id, written unless `stored` (the record there, may be NULL) already is
 * exactly that: a start of the same build writes nothing. */
static int put_identity(nf_store_t *st, const nf_identity_t *id, const char *stored, char *err,
                        size_t errlen)
{
    nf_buildinfo_item_t bi[NF_BUILDINFO_MAX];
    size_t nbi = nf_buildinfo(bi);
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "format", NF_STATE_FORMAT);
        cJSON_AddStringToObject(o, "group", id->group);
        cJSON_AddStringToObject(o, "topic_prefix", id->topic_prefix);
        cJSON_AddStringToObject(o, "writer", id->writer);
        for (size_t i = 0; i < nbi && i < 2; i++) /* version, commit */
            cJSON_AddStringToObject(o, bi[i].name, bi[i].value);
    }
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) {
        snprintf(err, errlen, "state identity: out of memory");
        return -ENOMEM;
    }
    int r = stored && !strcmp(stored, s) ? 0 : nf_store_meta_put(st, META_NAME, s, err, errlen);
    free(s);
    return r;
}

/* The first field of id that differs from the record's: its name, the record's value, ours. */
static const char *mismatch(const cJSON *rec, const nf_identity_t *id, const char **theirs,
                            const char **ours)
{
    const char *names[] = {"group", "topic_prefix", "writer"};
    const char *mine[] = {id->group, id->topic_prefix, id->writer};
    for (size_t i = 0; i < 3; i++) {
        const char *v = str_of(rec, names[i]);
        if (v && strcmp(v, mine[i]) != 0) {
            *theirs = v;
            *ours = mine[i];
            return names[i];
        }
    }
    return NULL;
}

int nf_identity_check(nf_store_t *st, const nf_identity_t *id, bool *recorded, char *err,
                      size_t errlen)
{
    *recorded = false;
    char *text = NULL;
    int r = nf_store_meta_get(st, META_NAME, &text, err, errlen);
    if (r < 0)
        return r;
    if (r == 0) {
        *recorded = true;
        return put_identity(st, id, NULL, err, errlen);
    }
    cJSON *rec = cJSON_Parse(text);
    const char *dir = nf_store_state_dir(st);
    if (!rec) {
        snprintf(err, errlen,
                 "state.dir %s: its identity record does not parse: the state is damaged "
                 "(docs/runbooks.md \"Corrupt live store\")",
                 dir);
        free(text);
        return -EEXIST;
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(rec, "format");
    int format = cJSON_IsNumber(f) ? (int)f->valuedouble : 0;
    const char *ver = str_of(rec, "version"), *commit = str_of(rec, "commit");
    const char *theirs = NULL, *ours = NULL;
    const char *field = mismatch(rec, id, &theirs, &ours);
    if (format > NF_STATE_FORMAT) {
        snprintf(err, errlen,
                 "state.dir %s holds state format %d, written by newsflow %s (%s); this build "
                 "reads format %d at most: run that version (or a newer one), or restore a named "
                 "checkpoint this build wrote (--from-checkpoint); a downgrade cannot read it",
                 dir, format, ver ? ver : "?", commit ? commit : "?", NF_STATE_FORMAT);
        r = -EEXIST;
    } else if (field) {
        snprintf(err, errlen,
                 "state.dir %s holds the state of another job: its %s is \"%s\", this job's "
                 "kafka.%s is \"%s\" (recorded: group \"%s\", topic prefix \"%s\", writer "
                 "\"%s\"). Point state.dir at this job's own directory, or set this job's "
                 "settings back; to start this job over, move the directory away "
                 "(docs/runbooks.md \"State from another job\")",
                 dir, field, theirs,
                 !strcmp(field, "writer")  ? "transactional_id"
                 : !strcmp(field, "group") ? "group_id"
                                           : "topic_prefix",
                 ours, str_of(rec, "group") ? str_of(rec, "group") : "",
                 str_of(rec, "topic_prefix") ? str_of(rec, "topic_prefix") : "",
                 str_of(rec, "writer") ? str_of(rec, "writer") : "");
        r = -EEXIST;
    } else {
        r = put_identity(st, id, text, err, errlen); /* this build opened it last */
    }
    cJSON_Delete(rec);
    free(text);
    return r;
}
