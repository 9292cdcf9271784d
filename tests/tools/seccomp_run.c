/* seccomp_run.c — runs a command under a seccomp profile file in Docker's JSON format (the one
 * Kubernetes' Localhost profiles, Docker and Podman read), for tests/integration/
 * test_deploy_manifests.sh: does newsflow run under deploy/seccomp/newsflow.json, and what does
 * it say under the default profile, which blocks io_uring?
 *
 *   nf_seccomp_run PROFILE.json COMMAND [ARG]...
 *
 * The profile is applied as a container runtime applies it to a container without
 * capabilities (a pod with `capabilities: {drop: [ALL]}`): defaultAction (and defaultErrnoRet)
 * for every syscall no rule names; a rule applies when its includes hold (no capability may be
 * required, its arches include amd64, its minKernel is at most this kernel's) and its excludes
 * do not (excluded capabilities are absent: they hold); its args are compared as libseccomp
 * compares them (one rule per name, the conditions ANDed). Syscall names this libseccomp does
 * not know are skipped, as runc does. Then no_new_privs, the filter, and exec.
 *
 * Exit: the command's (exec), or 125 when the profile cannot be read or loaded (the message
 * says why). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "nf_seccomp_run: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(125);
}

static uint32_t action_of(const cJSON *action, const cJSON *errno_ret, int default_errno)
{
    const char *a = cJSON_IsString(action) ? action->valuestring : "";
    int e = cJSON_IsNumber(errno_ret) ? errno_ret->valueint : default_errno;
    if (!strcmp(a, "SCMP_ACT_ALLOW"))
        return SCMP_ACT_ALLOW;
    if (!strcmp(a, "SCMP_ACT_ERRNO"))
        return SCMP_ACT_ERRNO((uint16_t)e);
    if (!strcmp(a, "SCMP_ACT_KILL") || !strcmp(a, "SCMP_ACT_KILL_THREAD"))
        return SCMP_ACT_KILL;
    if (!strcmp(a, "SCMP_ACT_KILL_PROCESS"))
        return SCMP_ACT_KILL_PROCESS;
    if (!strcmp(a, "SCMP_ACT_TRAP"))
        return SCMP_ACT_TRAP;
    if (!strcmp(a, "SCMP_ACT_LOG"))
        return SCMP_ACT_LOG;
    die("unknown action", a);
    return 0;
}

static bool has_amd64(const cJSON *arches)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, arches)
    {
        if (cJSON_IsString(a) && !strcmp(a->valuestring, "amd64"))
            return true;
    }
    return false;
}

/* "5.8" against this kernel's release. */
static bool kernel_at_least(const char *v)
{
    struct utsname u;
    int want_major = 0, want_minor = 0, major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(v, "%d.%d", &want_major, &want_minor) < 1 ||
        sscanf(u.release, "%d.%d", &major, &minor) != 2)
        return false;
    return major > want_major || (major == want_major && minor >= want_minor);
}

/* Whether the rule applies to a container without capabilities on amd64. */
static bool applies(const cJSON *rule)
{
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(rule, "includes");
    const cJSON *exc = cJSON_GetObjectItemCaseSensitive(rule, "excludes");
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(inc, "caps");
    const cJSON *arches = cJSON_GetObjectItemCaseSensitive(inc, "arches");
    const cJSON *kern = cJSON_GetObjectItemCaseSensitive(inc, "minKernel");
    if (cJSON_GetArraySize(caps) > 0)
        return false; /* needs a capability the container lacks */
    if (cJSON_GetArraySize(arches) > 0 && !has_amd64(arches))
        return false;
    if (cJSON_IsString(kern) && !kernel_at_least(kern->valuestring))
        return false;
    const cJSON *xarches = cJSON_GetObjectItemCaseSensitive(exc, "arches");
    if (cJSON_GetArraySize(xarches) > 0 && has_amd64(xarches))
        return false;
    return true; /* excluded capabilities are absent: the exclusion holds */
}

static enum scmp_compare op_of(const char *s)
{
    static const struct {
        const char *name;
        enum scmp_compare op;
    } ops[] = {{"SCMP_CMP_NE", SCMP_CMP_NE},
               {"SCMP_CMP_LT", SCMP_CMP_LT},
               {"SCMP_CMP_LE", SCMP_CMP_LE},
               {"SCMP_CMP_EQ", SCMP_CMP_EQ},
               {"SCMP_CMP_GE", SCMP_CMP_GE},
               {"SCMP_CMP_GT", SCMP_CMP_GT},
               {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(ops[i].name, s))
            return ops[i].op;
    die("unknown comparison", s);
    return SCMP_CMP_EQ;
}

/* A number of o (0 when absent: omitted fields are zero in the format). */
static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void add_rule(scmp_filter_ctx ctx, const cJSON *rule, int default_errno)
{
    (void)default_errno; /* a rule without errnoRet returns EPERM, as runc does */
    uint32_t act = action_of(cJSON_GetObjectItemCaseSensitive(rule, "action"),
                             cJSON_GetObjectItemCaseSensitive(rule, "errnoRet"), EPERM);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(rule, "args");
    struct scmp_arg_cmp cmp[6];
    unsigned n = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, args)
    {
        if (n == 6)
            die("a rule compares more than 6 arguments", NULL);
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(a, "op");
        cmp[n++] = (struct scmp_arg_cmp){.arg = (unsigned)num(a, "index"),
                                         .op = op_of(cJSON_IsString(op) ? op->valuestring : ""),
                                         .datum_a = (scmp_datum_t)num(a, "value"),
                                         .datum_b = (scmp_datum_t)num(a, "valueTwo")};
    }
    const cJSON *name;
    cJSON_ArrayForEach(name, cJSON_GetObjectItemCaseSensitive(rule, "names"))
    {
        if (!cJSON_IsString(name))
            die("a name that is not a string in", "names");
        int nr = seccomp_syscall_resolve_name(name->valuestring);
        if (nr == __NR_SCMP_ERROR)
            continue; /* unknown to this libseccomp: runc skips it too */
        int r = seccomp_rule_add_array(ctx, act, nr, n, cmp);
        if (r != 0 && r != -EEXIST && r != -EACCES) /* EACCES: the rule equals the default */
            die("seccomp_rule_add failed for", name->valuestring);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: nf_seccomp_run PROFILE.json COMMAND [ARG]...", NULL);
    FILE *f = fopen(argv[1], "r");
    if (!f)
        die(strerror(errno), argv[1]);
    static char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    cJSON *p = cJSON_Parse(buf);
    if (!p)
        die("not JSON", argv[1]);
    const cJSON *def_errno = cJSON_GetObjectItemCaseSensitive(p, "defaultErrnoRet");
    int eno = cJSON_IsNumber(def_errno) ? def_errno->valueint : EPERM;
    uint32_t def =
        action_of(cJSON_GetObjectItemCaseSensitive(p, "defaultAction"), def_errno, EPERM);
    scmp_filter_ctx ctx = seccomp_init(def);
    if (!ctx)
        die("seccomp_init failed", NULL);
    const cJSON *rule;
    cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(p, "syscalls"))
    {
        if (applies(rule))
            add_rule(ctx, rule, eno);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        die("no_new_privs", strerror(errno));
    int r = seccomp_load(ctx);
    if (r != 0)
        die("seccomp_load failed", strerror(-r));
    seccomp_release(ctx);
    cJSON_Delete(p);
    execvp(argv[2], argv + 2);
    die("exec failed", strerror(errno));
    return 125;
}
