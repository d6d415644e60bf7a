/** The bus contract, run against the in-memory default. */
import { MemoryBus } from '../lib/index.ts';
import { describeBusContract } from './helpers/bus-contract.ts';

describeBusContract('MemoryBus', () => ({ bus: new MemoryBus(), close: () => {} }));
