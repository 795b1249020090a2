export type {
  ConformanceFixture,
  ConformanceTarget,
  RecipientEventCase,
  RecipientRefusalCase,
  RecipientReportExpectation,
  WebhookCase,
} from './fixture.ts';
export { sampleMessage } from './sample-message.ts';
export { recordingContext, type RecordingContext } from './recording-context.ts';
export { runConformance, type CheckResult } from './run.ts';
export { conformanceTest, type TapLike } from './tap.ts';
