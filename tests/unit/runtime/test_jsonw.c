/* Tests src/runtime/jsonw.c: what it writes parses back (cJSON) to the same values, for
 * strings with every control byte, quotes, backslashes and UTF-8, nested objects and arrays,
 * integers at their limits, and a reused buffer. */
#include "nf_test.h"
#include "runtime/jsonw.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

static void test_round_trip(void)
{
    char nasty[64];
    size_t n = 0;
    for (int c = 1; c < 0x20; c++)
        nasty[n++] = (char)c;
    static const char tail[] = "\"\\/é漢"; /* quote, backslash, slash, 2- and 3-byte UTF-8 */
    memcpy(nasty + n, tail, sizeof tail - 1);
    n += sizeof tail - 1;
    nasty[n] = '\0';
    nf_jw_t w;
    nf_jw_init(&w);
    for (int round = 0; round < 2; round++) { /* the second round reuses the buffer */
        nf_jw_reset(&w);
        nf_jw_obj_open(&w);
        nf_jw_key(&w, "s");
        nf_jw_str(&w, nasty);
        nf_jw_key(&w, "null");
        nf_jw_str(&w, NULL);
        nf_jw_key(&w, "min");
        nf_jw_i64(&w, INT64_MIN + 1);
        nf_jw_key(&w, "max");
        nf_jw_u64(&w, 9007199254740991ull);
        nf_jw_key(&w, "arr");
        nf_jw_arr_open(&w);
        for (int i = 0; i < 3; i++) {
            nf_jw_elem(&w);
            nf_jw_obj_open(&w);
            nf_jw_key(&w, "i");
            nf_jw_i64(&w, i);
            nf_jw_key(&w, "b");
            nf_jw_bool(&w, i % 2);
            nf_jw_obj_close(&w);
        }
        nf_jw_arr_close(&w);
        nf_jw_key(&w, "empty");
        nf_jw_arr_open(&w);
        nf_jw_arr_close(&w);
        nf_jw_obj_close(&w);
        NF_REQUIRE(!w.failed);
        cJSON *j = cJSON_Parse(w.buf);
        NF_REQUIRE(j);
        NF_CHECK_STR(cJSON_GetObjectItem(j, "s")->valuestring, nasty);
        NF_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "null")));
        NF_CHECK(cJSON_GetObjectItem(j, "max")->valuedouble == 9007199254740991.0);
        cJSON *arr = cJSON_GetObjectItem(j, "arr");
        NF_CHECK_EQ(cJSON_GetArraySize(arr), 3);
        NF_CHECK_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 2), "i")->valueint, 2);
        NF_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "b")));
        NF_CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(j, "empty")), 0);
        cJSON_Delete(j);
    }
    NF_CHECK(strstr(w.buf, "\"min\":-9223372036854775807") != NULL);
    nf_jw_free(&w);
}

int main(void)
{
    NF_RUN(test_round_trip);
    return nf_test_report();
}
