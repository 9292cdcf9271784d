/* Tests src/engine/classify.c: taxonomy load errors (each names the file and the key), the text
 * pipeline (case, apostrophes, stop words, stemming, phrases, title weighting), the output's
 * invariants over random texts, a reference model of the scoring formula over a small
 * taxonomy, determinism, the JSON form, and a hand-written labelled corpus classified with the
 * default config/taxonomy.json (>= 90% must get the intended top label; the confusion is
 * printed). */
#include "engine/classify.h"
#include "nf_test.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* Hand-written news paragraphs, {intended topic, title, body}: the labelled corpus. */
static const struct corpus_item {
    const char *topic, *title, *body;
} corpus[] = {
    {"politics", "Senate passes spending bill after late-night vote",
     "The Senate voted 52 to 47 early on Friday to approve a spending bill that keeps the "
     "government open until March. Republicans and Democrats traded blame over the delay, and "
     "the majority leader said the chamber would return to immigration after the recess."},
    {"politics", "Prime minister calls snap general election",
     "The prime minister announced a general election for June, hoping to take advantage of a lead "
     "in opinion polls. Opposition parties accused the government of putting party interest first, "
     "while several backbench lawmakers said they would not stand again."},
    {"politics", "Governor signs voting law as challengers line up",
     "The governor signed a law on Tuesday that changes how mail-in ballots are counted. Voting "
     "rights groups said they would challenge it, and two candidates in next year's primary "
     "promised to repeal the measure if elected."},
    {"world", "Ceasefire talks resume as envoys meet in Cairo",
     "Diplomats from Egypt, Qatar and the United States met in Cairo to revive ceasefire talks, as "
     "humanitarian agencies warned that aid convoys were still blocked at the border. The foreign "
     "minister said a deal on hostages was close."},
    {"world", "UN Security Council meets over border clashes",
     "The United Nations Security Council held an emergency session after troops from the two "
     "neighbours exchanged fire along the disputed border. Ambassadors called for restraint and "
     "the secretary-general offered to send an envoy to the region."},
    {"world", "Thousands flee as rebels advance on provincial capital",
     "Thousands of refugees crossed into neighbouring countries as rebels advanced on the "
     "provincial capital, aid groups said. The military junta imposed a curfew and foreign "
     "embassies told their citizens to leave while commercial flights were still running."},
    {"business", "Retail giant to cut 2,000 jobs in restructuring",
     "The retailer said it would close 60 stores and cut 2,000 jobs as part of a restructuring "
     "plan, after quarterly sales fell short of forecasts. The chief executive told investors the "
     "company would focus on online orders and its own brands."},
    {"business", "Drugmaker agrees to buy rival in $8bn deal",
     "The drugmaker agreed to acquire its smaller rival for about $8 billion, the latest in a wave "
     "of mergers in the industry. Shareholders of the target will receive cash, and the board "
     "expects the acquisition to add to earnings within two years."},
    {"business", "Start-up founder steps down after board dispute",
     "The founder of the delivery start-up stepped down as chief executive after a dispute with "
     "the board over the company's plans to raise new venture capital. The firm, valued at $2 "
     "billion last year, has struggled to turn a profit."},
    {"economy", "Inflation eases to 3.1% as fuel costs fall",
     "Consumer prices rose 3.1% in the year to October, down from 3.4% in September, as cheaper "
     "fuel offset higher food costs. Economists said the figures made a rate cut by the central "
     "bank more likely early next year, although wage growth remains strong."},
    {"economy", "Unemployment rises as economy slows",
     "The unemployment rate rose to 4.2% last month, the highest in two years, according to the "
     "monthly jobs report. Employers added fewer workers than expected, a sign that the economy is "
     "slowing after a long run of interest rate rises."},
    {"economy", "Government unveils budget with tax cuts for households",
     "The finance minister presented a budget that cuts income tax for low earners and raises "
     "spending on housing, while promising to bring the deficit down. Economists warned that "
     "higher borrowing could push up debt costs if growth disappoints."},
    {"markets", "Stocks slide as bond yields climb",
     "Shares fell on Wall Street on Thursday as ten-year Treasury yields climbed to their highest "
     "level since 2007. The S&P 500 lost 1.4% and the Nasdaq dropped 2%, while traders bet the "
     "Federal Reserve would keep rates high."},
    {"markets", "Bitcoin hits record as investors pile into crypto funds",
     "Bitcoin rose above $70,000 for the first time, extending a rally driven by inflows into new "
     "exchange-traded funds. Analysts said volatility remained high and warned investors that the "
     "cryptocurrency had fallen sharply after previous peaks."},
    {"markets", "FTSE 100 closes higher as miners rally",
     "The FTSE 100 ended the session 0.8% higher, led by mining stocks after copper prices jumped. "
     "Sterling slipped against the dollar and gilt yields eased, while shares in the bank rose "
     "after it announced a larger dividend."},
    {"technology", "Chipmaker unveils AI processor for data centres",
     "The chipmaker unveiled a new processor designed to train artificial intelligence models in "
     "data centres, saying it would be twice as fast as its previous generation. Cloud providers "
     "including Microsoft and Google are expected to be the first customers."},
    {"technology", "Hackers steal customer data in ransomware attack",
     "A ransomware attack on the software company exposed the personal data of millions of "
     "customers, the firm said. Hackers encrypted its servers and demanded payment, and "
     "cybersecurity experts warned users to change their passwords."},
    {"technology", "New smartphone update brings chatbot to millions",
     "An update to the smartphone operating system will put a chatbot built on a large language "
     "model in millions of pockets. The app can summarise messages and edit photos, although "
     "privacy campaigners questioned how user data would be used."},
    {"science", "Telescope spots water vapour on distant planet",
     "Astronomers using the James Webb Space Telescope have detected water vapour in the "
     "atmosphere of a planet orbiting a star 120 light years away. The research team said the "
     "discovery, published in the journal Nature, could help explain how planets form."},
    {"science", "Fossil reveals feathered dinosaur",
     "Scientists in China have described a fossil of a small feathered dinosaur that lived 150 "
     "million years ago. The specimen suggests that feathers evolved earlier than thought, the "
     "researchers said in a peer-reviewed study."},
    {"science", "Physicists measure neutron lifetime with new precision",
     "A team of physicists has measured how long a free neutron survives with unprecedented "
     "precision, in an experiment at a national laboratory. The result narrows a puzzle in "
     "particle physics and could test theories of the early universe."},
    {"health", "Hospital waiting lists reach record high",
     "Waiting lists for hospital treatment rose to a record 7.8 million, figures showed, as "
     "doctors and nurses warned that the health service was under strain. Patients waiting for "
     "cancer diagnosis faced the longest delays."},
    {"health", "New vaccine cuts severe flu cases by half, trial finds",
     "A new flu vaccine halved the number of severe infections in a clinical trial of 20,000 "
     "adults, researchers said. Health officials hope to offer it to older patients and people "
     "with heart disease before next winter."},
    {"health", "Mental health services struggle as demand grows",
     "Demand for mental health services among teenagers has doubled in five years, a report "
     "found, with many waiting months for therapy. Doctors said anxiety and depression were the "
     "most common reasons for referral to a specialist clinic."},
    {"sports", "Late goal sends United into Champions League quarter-finals",
     "A stoppage-time goal from the striker sent United into the Champions League quarter-finals "
     "after a tense second half. The manager praised his squad, and the goalkeeper made two fine "
     "saves to keep the visitors out."},
    {"sports", "Quarterback leads comeback as Chiefs reach Super Bowl",
     "The quarterback threw two touchdowns in the fourth quarter as the Chiefs came back from ten "
     "points down to reach the Super Bowl. The head coach said the team never lost belief in front "
     "of a sold-out stadium."},
    {"sports", "Tennis star wins fourth Grand Slam title",
     "She beat the defending champion in straight sets to win her fourth Grand Slam title, "
     "finishing the tournament without dropping a set. The final lasted 90 minutes under the roof "
     "of a packed centre court."},
    {"entertainment", "Sci-fi epic tops box office for third weekend",
     "The science fiction sequel topped the box office again, taking $45 million in North America "
     "over the weekend. The studio said the film, starring two Oscar winners, has now passed $600 "
     "million worldwide."},
    {"entertainment", "Singer announces world tour and new album",
     "The singer announced a new album and a world tour that will visit 40 cities next year. Fans "
     "crashed the ticketing site within minutes, and the lead single entered the Billboard chart "
     "at number one."},
    {"entertainment", "Streaming drama renewed for second season",
     "Netflix has renewed the crime drama for a second season after it became the most watched "
     "series on the platform. The actress who plays the detective said filming would begin in the "
     "spring with the same director."},
    {"culture", "Museum returns looted bronzes",
     "The museum will return dozens of bronze sculptures taken during the colonial era, after a "
     "long campaign by historians and community leaders. The curator said the artworks would be "
     "shown in a new gallery in their home city."},
    {"culture", "Debut novel wins Booker Prize",
     "A debut novel about three generations of a fishing family has won the Booker Prize. The "
     "judges praised the author's spare prose, and her publisher said it would reprint 100,000 "
     "copies of the book."},
    {"culture", "Theatre festival celebrates new playwrights",
     "The summer theatre festival opens with works by six new playwrights, alongside a revival of "
     "a classic opera and a ballet set to poetry. Organisers said ticket sales were the strongest "
     "since the arts council cut its funding."},
    {"environment", "Global emissions hit new high, report warns",
     "Global carbon emissions from fossil fuels rose to a record last year, scientists said, "
     "putting the Paris Agreement goal of limiting warming to 1.5C further out of reach. The "
     "report urged governments to cut methane and protect forests."},
    {"environment", "Coral reef suffers worst bleaching on record",
     "Marine biologists say the reef has suffered its worst bleaching on record after months of "
     "ocean heatwaves linked to climate change. Conservation groups called for urgent action to "
     "protect endangered species that depend on the ecosystem."},
    {"environment", "River pollution from sewage spills doubles",
     "Water companies released raw sewage into rivers and seas more than 400,000 times last year, "
     "double the previous total, environmental campaigners said. Wildlife groups warned that "
     "pollution was killing fish and harming biodiversity."},
    {"education", "Teachers strike over pay as schools close",
     "Thousands of schools closed on Wednesday as teachers went on strike over pay and "
     "workload. The education secretary urged the teachers union to return to talks, while "
     "parents scrambled to find childcare for pupils."},
    {"education", "University tuition fees to rise for first time in years",
     "Universities will be allowed to raise tuition fees for undergraduate students next year, the "
     "government said. Student groups warned that higher fees and rising rent would put off "
     "applicants from poorer families."},
    {"education", "Reading scores improve in primary schools",
     "Reading test scores in primary schools improved for the second year running, helped by extra "
     "tutoring and a new curriculum. Headteachers said literacy among pupils had recovered from "
     "the disruption to classroom learning."},
    {"crime", "Man charged with murder after stabbing",
     "A 24-year-old man has been charged with murder after a stabbing outside a nightclub on "
     "Saturday night, police said. Detectives are appealing for witnesses, and the suspect will "
     "appear before magistrates on Monday."},
    {"crime", "Former executive sentenced for fraud",
     "A former executive was sentenced to eight years in prison for a fraud that cost investors "
     "millions of dollars. The judge said the defendant had shown no remorse, and prosecutors said "
     "they would seek to recover the money."},
    {"crime", "Jury finds gang leader guilty of drug trafficking",
     "A jury found the gang leader guilty of drug trafficking and money laundering after a "
     "three-month trial. The court heard that the cartel smuggled cocaine through the port, and "
     "several members have already been convicted."},
    {"travel", "Airlines add summer flights as travel demand soars",
     "Airlines are adding hundreds of summer flights as tourists return to Mediterranean "
     "destinations, with bookings above pre-pandemic levels. Airports warned passengers to allow "
     "extra time for security checks and passport control."},
    {"travel", "City introduces tourist tax to tackle overtourism",
     "The city will charge day-trippers a fee to enter the historic centre, in an effort to "
     "tackle overtourism. Hotel owners said the tax would hurt visitors on a budget, while "
     "residents welcomed fewer crowds and cruise ships."},
    {"travel", "Ten island getaways for an autumn holiday",
     "From quiet beaches to mountain hikes, these islands offer a relaxed autumn holiday away "
     "from the crowds. We pick resorts and small hotels, with tips on ferries, the best time to "
     "book and what to see on a short trip."},
    {"lifestyle", "Five easy recipes for weeknight dinners",
     "These simple recipes take less than 30 minutes and use ingredients you probably already "
     "have. Our chef shares tips on cooking pasta, roasting vegetables and baking a quick dessert "
     "for the whole family."},
    {"lifestyle", "Autumn fashion trends: what to wear this season",
     "Oversized coats, knitted dresses and bold boots dominated the runway at fashion week. "
     "Stylists explain how to update your wardrobe without spending a fortune, and which outfits "
     "work for the office and the weekend."},
    {"lifestyle", "How to build a morning routine that sticks",
     "Experts say a good morning routine starts with sleep. A short workout, ten minutes of "
     "yoga or meditation and a proper breakfast can improve your mood, and wellness coaches "
     "suggest keeping your phone out of the bedroom."},
    {"energy", "Oil prices jump after OPEC agrees output cut",
     "Brent crude rose 4% to $86 a barrel after OPEC and its allies agreed to cut production by a "
     "million barrels per day. Analysts said higher oil prices would feed through to petrol and "
     "diesel costs within weeks."},
    {"energy", "Offshore wind farm begins supplying power to the grid",
     "The offshore wind farm, the largest in the world, began supplying electricity to the grid, "
     "its operator said. Its turbines will generate enough power for a million homes, part of a "
     "push to expand renewable energy."},
    {"energy", "Energy bills to fall as gas prices ease",
     "Household energy bills will fall by about 10% from April, the regulator said, as wholesale "
     "natural gas prices eased. Utilities warned that bills would stay well above levels seen "
     "before the energy crisis."},
    {"autos", "Carmaker recalls 500,000 vehicles over brake fault",
     "The carmaker is recalling more than 500,000 vehicles, including its best-selling SUV, over "
     "a brake fault that could increase the risk of a crash. Owners will be contacted by dealers "
     "and repairs will be free."},
    {"autos", "Electric car sales overtake diesel for first time",
     "Sales of electric cars overtook diesel models for the first time last month, industry "
     "figures showed. Drivers cited lower running costs, although motoring groups said more "
     "charging points were needed on motorways."},
    {"autos", "Tesla cuts prices as competition from Chinese automakers grows",
     "Tesla cut the price of its Model 3 sedan in several markets as Chinese automakers launched "
     "cheaper electric vehicles with longer range. Analysts said the move could squeeze margins "
     "across the auto industry."},
    {"religion", "Pope calls for peace in Easter message",
     "Pope Francis used his Easter message to call for peace, addressing thousands of faithful in "
     "St Peter's Square. The Vatican said the pontiff would visit three countries later this "
     "year to meet Catholic and Muslim leaders."},
    {"religion", "Church of England votes on blessing same-sex couples",
     "The Church of England's synod voted to allow priests to bless same-sex couples in services, "
     "a decision that divided bishops and congregations. The Archbishop of Canterbury said the "
     "church remained committed to unity."},
    {"religion", "Muslims mark the start of Ramadan",
     "Muslims around the world began fasting for Ramadan, with mosques holding evening prayers "
     "and community meals. Imams urged worshippers to support families struggling with the rising "
     "cost of food during the holy month."},
};

#define TAXONOMY NF_SOURCE_DIR "/config/taxonomy.json"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    return nf_test_xorshift(&rng);
}

static char tmpdir[] = "/tmp/nf_classify_XXXXXX";

/* Writes text to a fresh file in tmpdir; returns its path (static buffer). */
static const char *write_tmp(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

/* A small taxonomy whose words stem to distinct stems; %s slots let tests vary it. */
static const char *small_fmt =
    "{\"version\": 1, \"language\": \"english\", \"title_weight\": %s, \"max_labels\": %s,\n"
    " \"min_confidence\": %s, \"min_score\": %s, \"stop_words\": [\"the\", \"of\", \"and\"],\n"
    " \"topics\": [\n"
    "  {\"name\": \"alpha\", \"keywords\": {\"election\": 3, \"golf\": 1},\n"
    "   \"phrases\": {\"prime minister\": 4, \"house of commons\": 5}},\n"
    "  {\"name\": \"bravo\", \"keywords\": {\"tango\": 2, \"golf\": 2, \"kilo\": 1.5}},\n"
    "  {\"name\": \"charlie\", \"keywords\": {\"zulu\": 1}, \"phrases\": {\"tango zulu\": 2}},\n"
    "  {\"name\": \"delta\", \"keywords\": {\"boss\": 1}}\n"
    " ]}\n";

static nf_classify_taxonomy_t *load_small(const char *tw, const char *ml, const char *mc,
                                          const char *ms)
{
    char text[2048], err[256];
    snprintf(text, sizeof text, small_fmt, tw, ml, mc, ms);
    const char *path = write_tmp("small.json", text);
    nf_classify_taxonomy_t *t = path ? nf_classify_load(path, err, sizeof err) : NULL;
    if (!t)
        fprintf(stderr, "load_small: %s\n", err);
    return t;
}

/* Loads text and expects failure with an error containing the file name and want. */
static void expect_error(const char *text, const char *want)
{
    char err[512];
    const char *path = write_tmp("bad.json", text);
    NF_REQUIRE(path);
    nf_classify_taxonomy_t *t = nf_classify_load(path, err, sizeof err);
    NF_CHECK(t == NULL);
    nf_classify_free(t);
    if (!strstr(err, path) || !strstr(err, want)) {
        fprintf(stderr, "  error \"%s\" lacks \"%s\"\n", err, want);
        NF_CHECK(0);
    }
}

#define TOPIC(name, body) "{\"name\": \"" name "\", " body "}"
#define DOC(topics)                                                                                \
    "{\"version\": 1, \"language\": \"english\", \"stop_words\": [\"the\", \"of\"], \"topics\": "  \
    "[" topics "]}"

static void test_load_errors(void)
{
    char err[512];
    NF_CHECK(nf_classify_load("/nonexistent/taxonomy.json", err, sizeof err) == NULL);
    NF_CHECK(strstr(err, "/nonexistent/taxonomy.json: cannot read") != NULL);

    expect_error("{\"version\": 1,\n \"topics\": [\n}", ": line 3: invalid JSON");
    expect_error("[1]", "must be a JSON object");
    expect_error(DOC(TOPIC("a", "\"keywords\": {\"vote\": 1}")) "x", "invalid JSON");
    /* unknown fields, top level and in a topic */
    expect_error("{\"version\": 1, \"language\": \"english\", \"colour\": 1, \"topics\": []}",
                 "\"colour\": unknown key");
    expect_error(DOC(TOPIC("a", "\"keyword\": {\"vote\": 1}")),
                 "topics[0].\"keyword\": unknown key");
    expect_error("{\"language\": \"english\", \"topics\": []}", "version: must be 1");
    expect_error("{\"version\": 1, \"language\": \"klingon\", \"topics\": []}",
                 "language: \"klingon\" is not a libstemmer algorithm");
    expect_error(
        "{\"version\": 1, \"language\": \"english\", \"min_confidence\": 2, \"topics\": []}",
        "min_confidence: must be a number in [0, 1]");
    expect_error("{\"version\": 1, \"language\": \"english\", \"max_labels\": 2.5, \"topics\": []}",
                 "max_labels: must be an integer");
    expect_error("{\"version\": 1, \"language\": \"english\", \"topics\": []}",
                 "topics: must be a non-empty array");
    expect_error("{\"version\": 1, \"language\": \"english\", \"stop_words\": [\"a b\"], "
                 "\"topics\": []}",
                 "stop_words[0] \"a b\": must be exactly one word");
    /* weights */
    expect_error(DOC(TOPIC("a", "\"keywords\": {\"tax\": 1}") "," TOPIC(
                     "b", "\"keywords\": {\"ballot\": 2, \"vote\": -1}")),
                 "topics[1].keywords.\"vote\": weight must be a number in (0, 100]");
    expect_error(DOC(TOPIC("a", "\"keywords\": {\"vote\": \"high\"}")),
                 "topics[0].keywords.\"vote\": weight");
    expect_error(DOC(TOPIC("a", "\"phrases\": {\"prime minister\": 0}")),
                 "topics[0].phrases.\"prime minister\": weight");
    /* names */
    expect_error(
        DOC(TOPIC("a", "\"keywords\": {\"vote\": 1}") "," TOPIC("a", "\"keywords\": {\"tax\": 1}")),
        "topics[1].name: \"a\" is already the name of topics[0]");
    expect_error(DOC(TOPIC("Bad Name", "\"keywords\": {\"vote\": 1}")), "topics[0].name");
    expect_error(DOC("{\"keywords\": {\"vote\": 1}}"), "topics[0].name");
    expect_error(DOC(TOPIC("a", "\"description\": \"x\"")), "needs \"keywords\" or \"phrases\"");
    /* terms */
    expect_error(DOC(TOPIC("a", "\"keywords\": {\"prime minister\": 1}")),
                 "topics[0].keywords.\"prime minister\": must be exactly one word");
    expect_error(DOC(TOPIC("a", "\"keywords\": {\"the\": 1}")),
                 "topics[0].keywords.\"the\": must be exactly one word that is not a stop word");
    expect_error(DOC(TOPIC("a", "\"phrases\": {\"the minister\": 1}")),
                 "topics[0].phrases.\"the minister\": must have 2..8 words");
    expect_error(DOC(TOPIC("a", "\"keywords\": {\"election\": 1, \"elections\": 2}")),
                 "topics[0].keywords.\"elections\": same stem as keyword \"election\"");
    expect_error(DOC(TOPIC("a", "\"phrases\": {\"prime minister\": 1, \"Prime Ministers\": 2}")),
                 "topics[0].phrases.\"Prime Ministers\": same stems as phrase \"prime minister\"");
    expect_error(DOC(TOPIC("a", "\"keywords\": []")), "topics[0].keywords: must be an object");

    /* at most 64 topics */
    static char big[65 * 64 + 256];
    size_t n = (size_t)snprintf(big, sizeof big,
                                "{\"version\": 1, \"language\": \"english\", \"topics\": [");
    for (int i = 0; i < 65; i++)
        n += (size_t)snprintf(big + n, sizeof big - n,
                              "%s{\"name\": \"t%d\", \"keywords\": "
                              "{\"w%d\": 1}}",
                              i ? "," : "", i, i);
    snprintf(big + n, sizeof big - n, "]}");
    expect_error(big, "topics: 65 topics, at most 64 are allowed");
    /* ... and 64 are fine */
    char *last = strstr(big, ",{\"name\": \"t64\"");
    NF_REQUIRE(last);
    strcpy(last, "]}");
    const char *path = write_tmp("64.json", big);
    nf_classify_taxonomy_t *t = nf_classify_load(path, err, sizeof err);
    NF_REQUIRE(t);
    NF_CHECK_EQ(nf_classify_topic_count(t), 64);
    NF_CHECK_STR(nf_classify_topic_name(t, 63), "t63");
    NF_CHECK(nf_classify_topic_name(t, 64) == NULL);
    NF_CHECK_EQ(nf_classify_topic_index(t, "t7"), 7);
    NF_CHECK_EQ(nf_classify_topic_index(t, "nope"), -1);
    nf_classify_free(t);
}

static void test_default_taxonomy_loads(void)
{
    char err[512];
    nf_classify_taxonomy_t *t = nf_classify_load(TAXONOMY, err, sizeof err);
    if (!t)
        fprintf(stderr, "%s\n", err);
    NF_REQUIRE(t);
    NF_CHECK(nf_classify_topic_count(t) >= 15);
    NF_CHECK(nf_classify_topic_index(t, "politics") >= 0);
    NF_CHECK(nf_classify_topic_index(t, "sports") >= 0);
    /* the hash is a function of the content */
    nf_classify_taxonomy_t *t2 = nf_classify_load(TAXONOMY, err, sizeof err);
    NF_REQUIRE(t2);
    NF_CHECK(nf_classify_taxonomy_hash(t) == nf_classify_taxonomy_hash(t2));
    nf_classify_free(t2);
    nf_classify_free(t);
}

static void test_hash_tracks_content(void)
{
    nf_classify_taxonomy_t *a = load_small("3", "3", "0.15", "0");
    nf_classify_taxonomy_t *b = load_small("3", "3", "0.15", "0");
    nf_classify_taxonomy_t *c = load_small("2", "3", "0.15", "0");
    nf_classify_taxonomy_t *d = load_small("3", "3", "0.2", "0");
    NF_REQUIRE(a && b && c && d);
    NF_CHECK(nf_classify_taxonomy_hash(a) == nf_classify_taxonomy_hash(b));
    NF_CHECK(nf_classify_taxonomy_hash(a) != nf_classify_taxonomy_hash(c));
    NF_CHECK(nf_classify_taxonomy_hash(a) != nf_classify_taxonomy_hash(d));
    char err[256];
    /* whitespace and descriptions do not matter; a weight does */
    const char *p = write_tmp("h1.json", DOC(TOPIC("a", "\"keywords\": {\"vote\": 1}")));
    nf_classify_taxonomy_t *e = nf_classify_load(p, err, sizeof err);
    p = write_tmp("h2.json", DOC(TOPIC("a", "\"description\": \"x\",\n\n \"keywords\": "
                                            "{\"vote\":   1}")));
    nf_classify_taxonomy_t *f = nf_classify_load(p, err, sizeof err);
    p = write_tmp("h3.json", DOC(TOPIC("a", "\"keywords\": {\"vote\": 2}")));
    nf_classify_taxonomy_t *g = nf_classify_load(p, err, sizeof err);
    NF_REQUIRE(e && f && g);
    NF_CHECK(nf_classify_taxonomy_hash(e) == nf_classify_taxonomy_hash(f));
    NF_CHECK(nf_classify_taxonomy_hash(e) != nf_classify_taxonomy_hash(g));
    nf_classify_free(a);
    nf_classify_free(b);
    nf_classify_free(c);
    nf_classify_free(d);
    nf_classify_free(e);
    nf_classify_free(f);
    nf_classify_free(g);
}

static bool norm_ok(const nf_classify_result_t *r)
{
    if (!r->ntopics)
        return true;
    double sq = 0;
    for (unsigned i = 0; i < r->ntopics; i++)
        sq += r->topics[i].weight * r->topics[i].weight;
    return fabs(sqrt(sq) - 1.0) <= 1e-12;
}

/* Score of topic name in r (0 when absent). */
static double score_of(const nf_classify_taxonomy_t *t, const nf_classify_result_t *r,
                       const char *name)
{
    return r->score[nf_classify_topic_index(t, name)];
}

static void test_text_pipeline(void)
{
    nf_classify_taxonomy_t *t = load_small("3", "3", "0", "0");
    NF_REQUIRE(t);
    nf_classify_ctx_t *c = nf_classify_ctx_new(t);
    NF_REQUIRE(c);
    nf_classify_result_t r;

    /* nothing matched: empty vector, no labels */
    NF_CHECK_EQ(nf_classify_text(c, NULL, NULL, &r), 0);
    NF_CHECK_EQ(r.ntopics, 0);
    NF_CHECK_EQ(r.nlabels, 0);
    NF_CHECK_EQ(nf_classify_text(c, "", "nothing here at all", &r), 0);
    NF_CHECK_EQ(r.ntopics, 0);
    NF_CHECK_EQ(r.tokens, 4);

    /* stemming: every form hits the keyword "election" (weight 3) once per occurrence */
    NF_CHECK_EQ(nf_classify_text(c, NULL, "Elections", &r), 0);
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 3.0) < 1e-12);
    NF_CHECK_EQ(nf_classify_text(c, NULL, "ELECTED", &r), 0);
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 3.0) < 1e-12);
    NF_CHECK_EQ(r.ntopics, 1);
    NF_CHECK(r.topics[0].weight == 1.0);
    NF_CHECK_EQ(r.nlabels, 1);
    NF_CHECK(r.labels[0].confidence == 1.0);

    /* saturation: n occurrences count 1 + ln n */
    nf_classify_text(c, NULL, "election elections elected election", &r);
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 3.0 * (1 + log(4.0))) < 1e-12);

    /* title weighting: a title occurrence counts title_weight (3) times */
    nf_classify_text(c, "Kilo", NULL, &r);
    NF_CHECK(fabs(score_of(t, &r, "bravo") - 1.5 * 3) < 1e-12);
    nf_classify_text(c, "kilo", "kilo", &r);
    NF_CHECK(fabs(score_of(t, &r, "bravo") - 1.5 * 4) < 1e-12);

    /* a keyword shared by two topics scores for both with its own weights */
    nf_classify_text(c, NULL, "golf", &r);
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 1) < 1e-12);
    NF_CHECK(fabs(score_of(t, &r, "bravo") - 2) < 1e-12);
    NF_CHECK_EQ(r.topics[0].topic, nf_classify_topic_index(t, "bravo"));
    NF_CHECK(norm_ok(&r));

    /* phrases: stop words are dropped on both sides, case ignored, across line breaks */
    nf_classify_text(c, NULL, "The House of\nCommons sat.", &r);
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 5) < 1e-12);
    nf_classify_text(c, NULL, "house the commons", &r); /* stop word in between: still a match */
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 5) < 1e-12);
    nf_classify_text(c, NULL, "house lords commons", &r);
    NF_CHECK_EQ(r.ntopics, 0);
    /* a phrase's own keywords still count: tango (bravo 2) zulu (charlie 1) + phrase (charlie 2) */
    nf_classify_text(c, NULL, "tango zulu", &r);
    NF_CHECK(fabs(score_of(t, &r, "charlie") - 3) < 1e-12);
    NF_CHECK(fabs(score_of(t, &r, "bravo") - 2) < 1e-12);
    /* a phrase never spans title and body */
    nf_classify_text(c, "tango", "zulu", &r);
    NF_CHECK(fabs(score_of(t, &r, "charlie") - 1) < 1e-12);
    /* the phrase at the very end of the text, and cut short */
    nf_classify_text(c, NULL, "kilo prime minister", &r);
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 4) < 1e-12);
    nf_classify_text(c, NULL, "kilo prime", &r);
    NF_CHECK(score_of(t, &r, "alpha") == 0);

    /* apostrophes and Unicode punctuation */
    nf_classify_text(c, NULL, "the prime minister's", &r); /* possessive */
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 4) < 1e-12);
    nf_classify_text(c, NULL, "the prime minister\xe2\x80\x99s office", &r); /* U+2019 */
    NF_CHECK(fabs(score_of(t, &r, "alpha") - 4) < 1e-12);
    nf_classify_text(c, NULL, "the boss's car, the boss\xe2\x80\x99s", &r); /* not "bosss" */
    NF_CHECK(fabs(score_of(t, &r, "delta") - (1 + log(2.0))) < 1e-12);
    nf_classify_text(c, NULL, "golf\xe2\x80\x94tango", &r); /* em dash separates */
    NF_CHECK(fabs(score_of(t, &r, "bravo") - 4) < 1e-12);
    nf_classify_text(c, NULL, "\xe2\x80\x9cgolf\xe2\x80\x9d", &r); /* curly quotes */
    NF_CHECK(fabs(score_of(t, &r, "bravo") - 2) < 1e-12);
    nf_classify_text(c, NULL, "'golf' golf'tango", &r); /* quotes; inner apostrophe glues */
    NF_CHECK(fabs(score_of(t, &r, "bravo") - 2) < 1e-12);
    NF_CHECK_EQ(r.tokens, 2);
    nf_classify_text(c, NULL, "g\xc3\xb6lf golf\xc3\xa9", &r); /* non-ASCII stays in words */
    NF_CHECK_EQ(r.ntopics, 0);
    NF_CHECK_EQ(r.tokens, 2);

    /* stop words are not tokens; over-long words are skipped */
    char longw[200];
    memset(longw, 'x', sizeof longw - 1);
    longw[sizeof longw - 1] = '\0';
    nf_classify_text(c, "The and of", longw, &r);
    NF_CHECK_EQ(r.tokens, 0);
    nf_classify_ctx_free(c);
    nf_classify_free(t);
}

static void test_labels_thresholds(void)
{
    /* max_labels 2, min_confidence 0.2, min_score 1.5 */
    nf_classify_taxonomy_t *t = load_small("3", "2", "0.2", "1.5");
    NF_REQUIRE(t);
    nf_classify_ctx_t *c = nf_classify_ctx_new(t);
    NF_REQUIRE(c);
    nf_classify_result_t r;
    /* alpha 3 (election), bravo 2 (tango), charlie 1 (zulu): shares 1/2, 1/3, 1/6 */
    nf_classify_text(c, NULL, "election tango lima zulu", &r);
    NF_CHECK_EQ(r.ntopics, 3);
    NF_CHECK_EQ(r.nlabels, 2);
    NF_CHECK_STR(nf_classify_topic_name(t, r.labels[0].topic), "alpha");
    NF_CHECK(fabs(r.labels[0].confidence - 0.5) < 1e-12);
    NF_CHECK_STR(nf_classify_topic_name(t, r.labels[1].topic), "bravo");
    /* charlie: share 1/6 < 0.2 and score 1 < 1.5 */
    nf_classify_text(c, NULL, "zulu", &r);
    NF_CHECK_EQ(r.ntopics, 1);
    NF_CHECK_EQ(r.nlabels, 0); /* confidence 1 but score 1 < min_score */
    nf_classify_ctx_free(c);
    nf_classify_free(t);

    /* the thresholds are inclusive: alpha's share is exactly 3/6 */
    t = load_small("3", "3", "0.5", "3");
    NF_REQUIRE(t);
    c = nf_classify_ctx_new(t);
    nf_classify_text(c, NULL, "election tango lima zulu", &r);
    NF_CHECK_EQ(r.ntopics, 3);
    NF_CHECK_EQ(r.nlabels, 1);
    NF_CHECK(r.nlabels == 1 && r.labels[0].confidence == 0.5);
    nf_classify_ctx_free(c);
    nf_classify_free(t);

    t = load_small("3", "0", "0", "0");
    NF_REQUIRE(t);
    c = nf_classify_ctx_new(t);
    nf_classify_text(c, NULL, "election", &r);
    NF_CHECK_EQ(r.ntopics, 1);
    NF_CHECK_EQ(r.nlabels, 0);
    nf_classify_ctx_free(c);
    nf_classify_free(t);
}

/* Reference model: the scoring formula of classify.h computed naively over the small taxonomy.
 * Every vocabulary word stems to a stem of its own, so words can be compared as written. */
static const char *vocab[] = {"election", "golf",  "prime", "minister", "house",
                              "commons",  "tango", "kilo",  "zulu",     "the",
                              "of",       "and",   "lima",  "hotel",    "sierra"};
enum { NVOCAB = sizeof vocab / sizeof *vocab };
static const struct {
    const char *w;
    int topic;
    double weight;
} ref_kw[] = {{"election", 0, 3}, {"golf", 0, 1},   {"tango", 1, 2},
              {"golf", 1, 2},     {"kilo", 1, 1.5}, {"zulu", 2, 1}};
static const struct {
    const char *w[2];
    int topic;
    double weight;
} ref_ph[] = {
    {{"prime", "minister"}, 0, 4}, {{"house", "commons"}, 0, 5}, {{"tango", "zulu"}, 2, 2}};

static bool is_ref_stop(const char *w)
{
    return !strcmp(w, "the") || !strcmp(w, "of") || !strcmp(w, "and");
}

/* Counts of ref keyword k / phrase p in words[0..n) after stop-word removal. */
static void ref_count(const char **words, int n, unsigned *kc, unsigned *pc)
{
    const char *kept[64];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!is_ref_stop(words[i]))
            kept[m++] = words[i];
    for (size_t k = 0; k < sizeof ref_kw / sizeof *ref_kw; k++)
        for (int i = 0; i < m; i++)
            kc[k] += !strcmp(kept[i], ref_kw[k].w);
    for (size_t p = 0; p < sizeof ref_ph / sizeof *ref_ph; p++)
        for (int i = 0; i + 1 < m; i++)
            pc[p] += !strcmp(kept[i], ref_ph[p].w[0]) && !strcmp(kept[i + 1], ref_ph[p].w[1]);
}

static double ref_sat(unsigned n)
{
    return n ? 1 + log((double)n) : 0;
}

static void test_reference_model(void)
{
    const double tw = 2.5;
    nf_classify_taxonomy_t *t = load_small("2.5", "3", "0.15", "0.5");
    NF_REQUIRE(t);
    nf_classify_ctx_t *c = nf_classify_ctx_new(t);
    NF_REQUIRE(c);
    int before = nf_test_failed_checks;
    for (int iter = 0; iter < 3000; iter++) {
        const char *tw_[64], *bw[64];
        int nt = (int)(rnd() % 8), nb = (int)(rnd() % 40);
        char title[1024] = "", body[4096] = "";
        for (int i = 0; i < nt; i++) {
            tw_[i] = vocab[rnd() % NVOCAB];
            strcat(title, i ? (rnd() % 4 ? " " : ", ") : "");
            strcat(title, tw_[i]);
        }
        for (int i = 0; i < nb; i++) {
            bw[i] = vocab[rnd() % NVOCAB];
            strcat(body, i ? (rnd() % 5 ? " " : ". ") : "");
            if (rnd() % 7 == 0) { /* capitalized */
                char w[32];
                snprintf(w, sizeof w, "%s", bw[i]);
                w[0] = (char)(w[0] - 'a' + 'A');
                strcat(body, w);
            } else {
                strcat(body, bw[i]);
            }
        }
        unsigned tk[6] = {0}, bk[6] = {0}, tp[3] = {0}, bp[3] = {0};
        ref_count(tw_, nt, tk, tp);
        ref_count(bw, nb, bk, bp);
        double want[3] = {0};
        for (int k = 0; k < 6; k++)
            want[ref_kw[k].topic] += ref_kw[k].weight * (tw * ref_sat(tk[k]) + ref_sat(bk[k]));
        for (int p = 0; p < 3; p++)
            want[ref_ph[p].topic] += ref_ph[p].weight * (tw * ref_sat(tp[p]) + ref_sat(bp[p]));

        nf_classify_result_t r;
        NF_REQUIRE(nf_classify_text(c, nt ? title : NULL, body, &r) == 0);
        double sum = 0, sq = 0;
        unsigned positive = 0;
        for (int k = 0; k < 3; k++) {
            NF_CHECK(fabs(r.score[k] - want[k]) <= 1e-9 * (1 + want[k]));
            sum += want[k];
            sq += want[k] * want[k];
            positive += want[k] > 0;
        }
        NF_CHECK_EQ(r.ntopics, positive);
        NF_CHECK(norm_ok(&r));
        for (unsigned i = 0; i < r.ntopics; i++) {
            unsigned k = r.topics[i].topic;
            NF_CHECK(fabs(r.topics[i].weight - want[k] / sqrt(sq)) < 1e-12);
            if (i)
                NF_CHECK(
                    r.topics[i - 1].weight > r.topics[i].weight ||
                    (r.topics[i - 1].weight == r.topics[i].weight && r.topics[i - 1].topic < k));
        }
        /* labels: a prefix of the topic order, filtered by the thresholds */
        unsigned nl = 0;
        for (unsigned i = 0; i < r.ntopics && nl < 3; i++) {
            unsigned k = r.topics[i].topic;
            if (want[k] / sum >= 0.15 && want[k] >= 0.5) {
                NF_CHECK(nl < r.nlabels && r.labels[nl].topic == k);
                NF_CHECK(nl < r.nlabels && fabs(r.labels[nl].confidence - want[k] / sum) < 1e-12);
                nl++;
            }
        }
        NF_CHECK_EQ(r.nlabels, nl);
        if (nf_test_failed_checks != before) {
            fprintf(stderr, "  title \"%s\" body \"%s\"\n", title, body);
            break;
        }
    }
    nf_classify_ctx_free(c);
    nf_classify_free(t);
}

/* Random bytes and random words from the real taxonomy: invariants and determinism, and two
 * contexts (two shards) agree bit for bit. */
static bool same_result(const nf_classify_result_t *a, const nf_classify_result_t *b)
{
    if (a->ntopics != b->ntopics || a->nlabels != b->nlabels || a->tokens != b->tokens ||
        a->matches != b->matches || memcmp(a->score, b->score, sizeof a->score) != 0)
        return false;
    for (unsigned i = 0; i < a->ntopics; i++)
        if (a->topics[i].topic != b->topics[i].topic || a->topics[i].weight != b->topics[i].weight)
            return false;
    for (unsigned i = 0; i < a->nlabels; i++)
        if (a->labels[i].topic != b->labels[i].topic ||
            a->labels[i].confidence != b->labels[i].confidence)
            return false;
    return true;
}

static void test_invariants_random(void)
{
    int before = nf_test_failed_checks;
    char err[512];
    nf_classify_taxonomy_t *t = nf_classify_load(TAXONOMY, err, sizeof err);
    NF_REQUIRE(t);
    nf_classify_ctx_t *c1 = nf_classify_ctx_new(t), *c2 = nf_classify_ctx_new(t);
    NF_REQUIRE(c1 && c2);
    static const char *words[] = {
        "election",       "market",    "stocks",      "the",      "vaccine",
        "goal",           "film",      "Pope",        "climate",  "school",
        "police",         "hotel",     "recipe",      "oil",      "car",
        "galaxy",         "economy",   "museum",      "software", "of",
        "interest rates", "world cup", "wall street", "'s",       "\xe2\x80\x94",
        "caf\xc3\xa9",    "2024",      "a",           "and",      "prime minister"};
    enum { NW = sizeof words / sizeof *words };
    static char body[70000];
    nf_classify_result_t r1, r2;
    for (int iter = 0; iter < 400; iter++) {
        size_t n = 0, len = (size_t)(rnd() % (iter % 50 == 0 ? 65536 : 3000));
        if (iter % 3 == 0) {
            for (; n < len; n++) /* arbitrary bytes, NUL excluded */
                body[n] = (char)(1 + rnd() % 255);
        } else {
            while (n + 40 < len) {
                const char *w = words[rnd() % NW];
                n += (size_t)snprintf(body + n, sizeof body - n, "%s%s", w, rnd() % 6 ? " " : ". ");
            }
        }
        body[n] = '\0';
        const char *title = words[rnd() % NW];
        NF_REQUIRE(nf_classify_text(c1, title, body, &r1) == 0);
        NF_REQUIRE(nf_classify_text(c2, title, body, &r2) == 0);
        NF_CHECK(same_result(&r1, &r2));
        NF_CHECK(norm_ok(&r1));
        NF_CHECK(r1.nlabels <= 3 && r1.nlabels <= r1.ntopics);
        double sum = 0;
        for (unsigned i = 0; i < r1.ntopics; i++) {
            NF_CHECK(r1.topics[i].weight > 0 && r1.topics[i].weight <= 1);
            NF_CHECK(i == 0 || r1.topics[i - 1].weight >= r1.topics[i].weight);
            sum += r1.score[r1.topics[i].topic];
        }
        for (unsigned i = 0; i < r1.nlabels; i++) {
            NF_CHECK(r1.labels[i].confidence >= 0.15 && r1.labels[i].confidence <= 1);
            NF_CHECK(fabs(r1.labels[i].confidence - r1.score[r1.labels[i].topic] / sum) < 1e-12);
            NF_CHECK(i == 0 || r1.labels[i - 1].confidence >= r1.labels[i].confidence);
        }
        /* again on the same context: no state leaks between articles */
        NF_REQUIRE(nf_classify_text(c1, title, body, &r2) == 0);
        NF_CHECK(same_result(&r1, &r2));
        /* a cold context (empty word cache) agrees with the warm ones */
        if (iter % 16 == 0) {
            nf_classify_ctx_t *c3 = nf_classify_ctx_new(t);
            NF_REQUIRE(c3);
            NF_CHECK(nf_classify_text(c3, title, body, &r2) == 0);
            NF_CHECK(same_result(&r1, &r2));
            nf_classify_ctx_free(c3);
        }
        if (nf_test_failed_checks != before)
            break;
    }
    nf_classify_ctx_free(c1);
    nf_classify_ctx_free(c2);
    nf_classify_free(t);
}

static void test_json(void)
{
    nf_classify_taxonomy_t *t = load_small("3", "3", "0", "0");
    NF_REQUIRE(t);
    nf_classify_ctx_t *c = nf_classify_ctx_new(t);
    NF_REQUIRE(c);
    nf_classify_result_t r;
    nf_jw_t w;
    nf_jw_init(&w);
    nf_jw_obj_open(&w);
    nf_jw_key(&w, "article_id");
    nf_jw_str(&w, "x");
    nf_classify_text(c, NULL, "nothing", &r);
    nf_classify_json(t, &r, &w);
    nf_jw_obj_close(&w);
    NF_CHECK_STR(w.buf, "{\"article_id\":\"x\",\"category_labels\":[],\"topics\":{}}");
    nf_jw_reset(&w);
    nf_jw_obj_open(&w);
    nf_classify_text(c, NULL, "tango election", &r); /* alpha 3, bravo 2 */
    nf_classify_json(t, &r, &w);
    nf_jw_key(&w, "after");
    nf_jw_bool(&w, true);
    nf_jw_obj_close(&w);
    NF_CHECK_STR(w.buf, "{\"category_labels\":[{\"category\":\"alpha\",\"confidence\":0.6},"
                        "{\"category\":\"bravo\",\"confidence\":0.4}],"
                        "\"topics\":{\"alpha\":0.832050294,\"bravo\":0.554700196},\"after\":true}");
    nf_jw_free(&w);
    nf_classify_ctx_free(c);
    nf_classify_free(t);
}

static void test_corpus(void)
{
    char err[512];
    nf_classify_taxonomy_t *t = nf_classify_load(TAXONOMY, err, sizeof err);
    if (!t)
        fprintf(stderr, "%s\n", err);
    NF_REQUIRE(t);
    nf_classify_ctx_t *c = nf_classify_ctx_new(t);
    NF_REQUIRE(c);
    enum { N = sizeof corpus / sizeof *corpus };
    unsigned nt = nf_classify_topic_count(t);
    static unsigned confusion[NF_CLASSIFY_MAX_TOPICS][NF_CLASSIFY_MAX_TOPICS + 1];
    memset(confusion, 0, sizeof confusion);
    unsigned right = 0, topics_seen = 0, per_topic[NF_CLASSIFY_MAX_TOPICS] = {0};
    for (unsigned i = 0; i < N; i++) {
        int want = nf_classify_topic_index(t, corpus[i].topic);
        NF_REQUIRE(want >= 0);
        nf_classify_result_t r;
        NF_REQUIRE(nf_classify_text(c, corpus[i].title, corpus[i].body, &r) == 0);
        NF_CHECK(norm_ok(&r));
        unsigned got = r.nlabels ? r.labels[0].topic : nt; /* nt: no label */
        confusion[want][got]++;
        topics_seen += per_topic[want]++ == 0;
        if (got == (unsigned)want) {
            right++;
        } else {
            fprintf(stderr, "  miss: \"%s\": want %s, got %s (", corpus[i].title, corpus[i].topic,
                    got < nt ? nf_classify_topic_name(t, got) : "no label");
            for (unsigned k = 0; k < r.ntopics && k < 4; k++)
                fprintf(stderr, "%s%s %.3f", k ? ", " : "",
                        nf_classify_topic_name(t, r.topics[k].topic), r.topics[k].weight);
            fprintf(stderr, ")\n");
        }
    }
    fprintf(stderr, "  confusion (rows: intended, columns: top label; '-' no label):\n  %14s", "");
    for (unsigned j = 0; j <= nt; j++)
        fprintf(stderr, " %3.3s", j < nt ? nf_classify_topic_name(t, j) : "-");
    fprintf(stderr, "\n");
    for (unsigned i = 0; i < nt; i++) {
        if (!per_topic[i])
            continue;
        fprintf(stderr, "  %14s", nf_classify_topic_name(t, i));
        for (unsigned j = 0; j <= nt; j++)
            fprintf(stderr, " %3u", confusion[i][j]);
        fprintf(stderr, "\n");
    }
    fprintf(stderr, "  corpus: %u/%u correct (%.1f%%) over %u topics\n", right, (unsigned)N,
            100.0 * right / N, topics_seen);
    NF_CHECK(topics_seen >= 15);
    for (unsigned i = 0; i < nt; i++)
        NF_CHECK(per_topic[i] == 0 || per_topic[i] >= 3);
    NF_CHECK(right * 10 >= N * 9);
    nf_classify_ctx_free(c);
    nf_classify_free(t);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    NF_RUN(test_load_errors);
    NF_RUN(test_default_taxonomy_loads);
    NF_RUN(test_hash_tracks_content);
    NF_RUN(test_text_pipeline);
    NF_RUN(test_labels_thresholds);
    NF_RUN(test_reference_model);
    NF_RUN(test_invariants_random);
    NF_RUN(test_json);
    NF_RUN(test_corpus);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return nf_test_report();
}
