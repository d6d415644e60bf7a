/** The scenarios, in the order the bench runs them (and `--only` names them). */
import { crossnode } from './crossnode.ts';
import { disconnect } from './disconnect.ts';
import { fanout } from './fanout.ts';
import { fleet } from './fleet.ts';
import { notify } from './notify.ts';
import { idle } from './idle.ts';
import { open } from './open.ts';
import { passthrough } from './passthrough.ts';
import { resources } from './resources.ts';
import { slow } from './slow.ts';
import { tick } from './tick.ts';
import { validation } from './validation.ts';
import type { Scenario } from '../scenario.ts';

export const SCENARIOS: readonly Scenario[] = [
  fanout,
  tick,
  resources,
  slow,
  idle,
  open,
  passthrough,
  validation,
  disconnect,
  crossnode,
  fleet,
  notify,
];
