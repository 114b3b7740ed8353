// npm test (test/run.ts) sets OPENAPI_RESPONSE_CHECK=1 for the files it runs: every app the tests
// build then checks each answer against its own OpenAPI document, and a mismatch is a 500 that
// fails the test which caused it. Services started as child processes inherit the variable.

/** The response-check variable of this test process, for the configs the helpers load. */
export function responseCheckEnv(): { OPENAPI_RESPONSE_CHECK: string } {
  return { OPENAPI_RESPONSE_CHECK: process.env.OPENAPI_RESPONSE_CHECK ?? '' };
}
